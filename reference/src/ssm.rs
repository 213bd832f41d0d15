//! SSM_CONV and SSM_SCAN (Mamba-1 and Mamba-2), as ggml's ops.cpp.

use super::Node;
use super::unary::softplus;
use backplane_runtime::ComputeError;

/// Causal depthwise convolution: `out[r, t, s] = Σ_k sx[t + k, r, s] * c[k, r]`
/// for sx `[d_conv - 1 + n_t, d_inner, n_s]` and c `[d_conv, d_inner]`.
pub(crate) fn ssm_conv(n: &Node) -> Result<(), ComputeError> {
    let (sx, c) = (n.src(0)?, n.src(1)?);
    let (xn, cn) = (sx.ne(), c.ne());
    let n_t = xn[0] - cn[0] + 1;
    let mut out = Vec::with_capacity(n.dst.nelements() as usize);
    for s in 0..xn[2] {
        for t in 0..n_t {
            for r in 0..cn[1] {
                out.push(
                    (0..cn[0])
                        .map(|k| sx.get(t + k, r, s, 0) * c.get(k, r, 0, 0))
                        .sum(),
                );
            }
        }
    }
    n.store(&out)
}

/// Selective scan. For sequence `q`, the state starts as `s[.., ids[q]]`;
/// for each token, head h (group `g = h / (n_head / n_group)`), channel i
/// and state element j:
/// `dt' = softplus(dt[h])`, `state = state * exp(dt' * A) + B[j, g] * x[i, h] * dt'`
/// with A = `A[0, h]` (Mamba-2) or `A[j, h]` (Mamba-1), and
/// `y[i, h] = Σ_j state * C[j, g]`. The result holds every y
/// (`[head_dim, n_head, n_tok, n_seqs]`) followed by the final states
/// (`[d_state, head_dim, n_head, n_seqs]`).
pub(crate) fn ssm_scan(n: &Node) -> Result<(), ComputeError> {
    let [s, x, dt, a, b, c, ids] = [0, 1, 2, 3, 4, 5, 6].map(|i| n.src(i));
    let (s, x, dt, a, b, c, ids) = (s?, x?, dt?, a?, b?, c?, ids?);
    let d_state = s.ne()[0];
    let [head_dim, n_head, n_tok, n_seqs] = x.ne();
    let n_group = b.ne()[1];
    let heads_per_group = n_head / n_group;
    let scalar_a = a.ne()[0] == 1;
    let state_len = (d_state * head_dim * n_head) as usize;
    let mut y = Vec::with_capacity(x.nelements() as usize);
    let mut states = Vec::with_capacity(state_len * n_seqs as usize);
    for q in 0..n_seqs {
        let src = ids.int_at([q, 0, 0, 0]);
        if src < 0 || src >= s.ne()[3] {
            return Err(n.bad_input(format!(
                "ids[{q}] = {src} is outside 0..{} state slots",
                s.ne()[3]
            )));
        }
        // state[(h * head_dim + i) * d_state + j]
        let mut state = Vec::with_capacity(state_len);
        for h in 0..n_head {
            for i in 0..head_dim {
                state.extend(s.row(i, h, src));
            }
        }
        for t in 0..n_tok {
            for h in 0..n_head {
                let dt_sp = softplus(dt.get(h, t, q, 0));
                let g = h / heads_per_group;
                for i in 0..head_dim {
                    let x_dt = x.get(i, h, t, q) * dt_sp;
                    let mut sum = 0.0;
                    for j in 0..d_state {
                        let av = if scalar_a {
                            a.get(0, h, 0, 0)
                        } else {
                            a.get(j, h, 0, 0)
                        };
                        let k = ((h * head_dim + i) * d_state + j) as usize;
                        let st = state[k] * (dt_sp * av).exp() + b.get(j, g, t, q) * x_dt;
                        sum += st * c.get(j, g, t, q);
                        state[k] = st;
                    }
                    y.push(sum);
                }
            }
        }
        states.extend(state);
    }
    y.extend(states);
    n.store(&y)
}
