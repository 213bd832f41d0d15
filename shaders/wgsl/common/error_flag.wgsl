// The graph's error report: the first kernel to find bad input stores its
// node + 1 in word 0 of the error flag and the bad value in word 1; later
// reports leave both. Atomic, so kernels that run side by side may report
// (native replay puts no barrier between them for the flag). The including
// kernel declares `flag` (array<atomic<u32>>).

fn report_error(node1: u32, bad: u32) {
    loop {
        let r = atomicCompareExchangeWeak(&flag[0], 0u, node1);
        if (r.exchanged) {
            atomicStore(&flag[1], bad);
            break;
        }
        if (r.old_value != 0u) {
            break;
        }
    }
}
