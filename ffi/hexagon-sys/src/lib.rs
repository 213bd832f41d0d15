//! Run-time bindings to the Qualcomm compute-DSP user library
//! (`libcdsprpc.so`): FastRPC sessions (`remote_handle64_*`,
//! `remote_session_control`), shared memory (`rpcmem_*`, `fastrpc_mmap`),
//! message queues (`dspqueue_*`), and the HAP power request layout used to
//! vote the HMX clock.
//!
//! Nothing here links against the library: [`CdspRpc::load`] opens it with
//! `libloading` and resolves every symbol up front, so a machine without a
//! DSP gets an error value naming what is missing instead of a loader
//! failure. Declarations follow the Hexagon SDK headers `remote.h`,
//! `rpcmem.h`, `dspqueue.h` and `HAP_power.h`.

mod hap;
mod rpc;

pub use hap::{HAP_CLK_PERF_HIGH, HAP_DCVS_EXP_VCORNER_MAX, HAP_POWER_SET_HMX_V2, HapPowerHmxV2};
pub use rpc::{
    AEE_EEXPIRED, AEE_SUCCESS, CDSP_DOMAIN_ID, CdspRpc, DSPQUEUE_TIMEOUT_NONE,
    DSPRPC_CONTROL_UNSIGNED_MODULE, DspQueue, DspQueueBuffer, FASTRPC_MAP_FD, LoadError,
    RPCMEM_DEFAULT_FLAGS, RPCMEM_HEAP_ID_SYSTEM, RemoteArg, RemoteBuf, RemoteHandle64,
    RemoteRpcControlUnsignedModule, remote_scalars_make,
};
