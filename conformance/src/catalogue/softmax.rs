//! SOFT_MAX.

use backplane::{DType, Op};

use super::{Catalogue, dims};
use crate::case::Fill;

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    soft_max(c);
    c.grid(soft_max_ggml_grid);
}

fn soft_max(c: &mut Catalogue) {
    for ne in [
        [16, 2, 32, 1],
        [32, 7, 4, 2],
        [1, 1, 1, 1],
        [4096, 3, 2, 1],
        [37, 5, 6, 1],
    ] {
        for mask in [None, Some(DType::F32), Some(DType::F16)] {
            for (scale, max_bias) in [(1.0f32, 0.0f32), (0.1, 0.0), (0.1, 8.0)] {
                if max_bias > 0.0 && mask.is_none() {
                    continue;
                }
                for (m_bcast, sinks) in [(false, false), (true, false), (false, true)] {
                    if m_bcast && mask.is_none() {
                        continue;
                    }
                    let mname = mask.map(|m| m.name()).unwrap_or("none");
                    let name = format!(
                        "SOFT_MAX(type=f32,ne=[{}],mask={mname},m_bcast={m_bcast},sinks={sinks},scale={scale},max_bias={max_bias})",
                        dims(&ne)
                    );
                    c.push(Op::SoftMax, name, 1e-7, move |b| {
                        let x = b.input_with(DType::F32, &ne, Fill::Uniform(-5.0, 5.0))?;
                        let m = match mask {
                            Some(mt) => {
                                let mne = if m_bcast {
                                    [ne[0], ne[1], 1, 1]
                                } else {
                                    [ne[0], ne[1], ne[2], ne[3]]
                                };
                                Some(b.input_with(mt, &mne, Fill::Uniform(-1.0, 1.0))?)
                            }
                            None => None,
                        };
                        let s = if sinks {
                            Some(b.input_with(DType::F32, &[ne[2]], Fill::Uniform(-2.0, 2.0))?)
                        } else {
                            None
                        };
                        b.g.soft_max(x, m, s, scale, max_bias)
                    });
                }
            }
        }
    }
}

/// test-backend-ops' SOFT_MAX loops: with and without mask (f32, f16),
/// sinks, ALiBi and scale over 16/1024 (and one less) rows and columns,
/// masks broadcast over dims 2 and 3 for the small shapes.
fn soft_max_ggml_grid(c: &mut Catalogue) {
    #[allow(clippy::too_many_arguments)]
    fn push(
        c: &mut Catalogue,
        ne: [i64; 4],
        mask: bool,
        sinks: bool,
        m_prec: DType,
        nr23: [i64; 2],
        scale: f32,
        max_bias: f32,
    ) {
        let name = format!(
            "SOFT_MAX(type=f32,ne=[{}],mask={mask},sinks={sinks},m_prec={m_prec},nr23=[{}],scale={scale},max_bias={max_bias})",
            dims(&ne),
            dims(&nr23)
        );
        c.push(Op::SoftMax, name, 1e-7, move |b| {
            let a = b.input_with(
                DType::F32,
                &[ne[0], ne[1], ne[2] * nr23[0], ne[3] * nr23[1]],
                Fill::Uniform(-5.0, 5.0),
            )?;
            let m = if mask {
                Some(b.input_with(m_prec, &ne, Fill::Uniform(-1.0, 1.0))?)
            } else {
                None
            };
            let s = if sinks {
                Some(b.input_with(DType::F32, &[ne[2] * nr23[0]], Fill::Uniform(-2.0, 2.0))?)
            } else {
                None
            };
            b.g.soft_max(a, m, s, scale, max_bias)
        });
    }
    for mask in [false, true] {
        for sinks in [false, true] {
            for max_bias in [0.0f32, 8.0] {
                if !mask && max_bias > 0.0 {
                    continue;
                }
                for scale in [1.0f32, 0.1] {
                    for ne0 in [16i64, 1024] {
                        for ne1 in [16i64, 1024] {
                            let precs: &[DType] = if mask {
                                &[DType::F32, DType::F16]
                            } else {
                                &[DType::F32]
                            };
                            for &mp in precs {
                                let (a, s) = ([ne0, ne1, 1, 1], [ne0 - 1, ne1 - 1, 1, 1]);
                                push(c, a, mask, sinks, mp, [1, 1], scale, max_bias);
                                push(c, s, mask, sinks, mp, [1, 1], scale, max_bias);
                                if mask && ne0 <= 32 && ne1 <= 32 {
                                    let a3 = [ne0, ne1, 1, 3];
                                    push(c, a3, mask, sinks, mp, [3, 1], scale, max_bias);
                                    push(c, s, mask, sinks, mp, [2, 3], scale, max_bias);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    for (ne0, mask, sinks, mp, max_bias) in [
        (16, true, true, DType::F32, 0.0f32),
        (16, true, false, DType::F16, 0.0),
        (16, false, true, DType::F32, 0.0),
        (32, true, true, DType::F32, 0.0),
        (32, true, false, DType::F16, 0.0),
        (32, true, true, DType::F32, 8.0),
        (32, true, true, DType::F16, 8.0),
    ] {
        push(c, [ne0, 2, 32, 1], mask, sinks, mp, [1, 1], 0.1, max_bias);
    }
}
