// Linear invocation index of a 1-D dispatch that the host may have split
// over x and y (Encoder::dispatch_linear): workgroup (x, y) covers indices
// ((y * num_workgroups.x) + x) * wg_size + local index.
fn linear_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32, wg_size: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * wg_size + lid;
}

// Splits a linear element index into (i0, i1, i2, i3) for dims ne.
fn unravel(i: u32, ne0: u32, ne1: u32, ne2: u32) -> vec4<u32> {
    let i0 = i % ne0;
    let r = i / ne0;
    let i1 = r % ne1;
    let r2 = r / ne1;
    return vec4<u32>(i0, i1, r2 % ne2, r2 / ne2);
}
