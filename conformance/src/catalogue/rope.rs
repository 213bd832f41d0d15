//! ROPE.

use backplane::{DType, Op, RopeParams, rope_mode};

use super::{Catalogue, bound_for, dims};
use crate::case::Fill;

/// Adds the family's cases.
pub(super) fn add(c: &mut Catalogue) {
    rope(c);
    c.grid(rope_ggml_grid);
    c.grid(rope_ggml_grid_views_and_models);
}

fn rope(c: &mut Catalogue) {
    let variants: [(i32, i64, i32, [i32; 4]); 6] = [
        (rope_mode::NORMAL, 128, 128, [0; 4]),
        (rope_mode::NORMAL, 64, 32, [0; 4]),
        (rope_mode::NEOX, 128, 128, [0; 4]),
        (rope_mode::NEOX, 80, 64, [0; 4]),
        (rope_mode::MROPE, 128, 128, [16, 24, 24, 0]),
        (rope_mode::IMROPE, 128, 128, [24, 20, 20, 0]),
    ];
    let mut all = variants.to_vec();
    all.push((rope_mode::VISION, 64, 32, [8, 8, 0, 0]));
    for (mode, ne0, n_dims, sections) in all {
        for dt in [DType::F32, DType::F16] {
            for (ext_factor, freq_scale, ff) in [
                (0.0f32, 1.0f32, false),
                (1.0, 0.25, false),
                (0.0, 1.0, true),
            ] {
                if ff && !(mode == rope_mode::NORMAL || mode == rope_mode::NEOX) {
                    continue;
                }
                let (heads, tokens) = (4i64, 7i64);
                let name = format!(
                    "ROPE(type={dt},ne=[{ne0},{heads},{tokens},1],n_dims={n_dims},mode={mode},ext_factor={ext_factor},freq_scale={freq_scale},ff={ff})"
                );
                c.push(Op::Rope, name, bound_for(dt), move |b| {
                    let x = b.input(dt, &[ne0, heads, tokens, 1])?;
                    let per = if mode & rope_mode::MROPE != 0 { 4 } else { 1 };
                    let pos = b.input_with(DType::I32, &[tokens * per], Fill::Index(4096))?;
                    let f = if ff {
                        Some(b.input_with(
                            DType::F32,
                            &[n_dims as i64 / 2],
                            Fill::Uniform(0.9, 1.1),
                        )?)
                    } else {
                        None
                    };
                    let mut p = RopeParams::new(n_dims, mode);
                    p.n_ctx_orig = 4096;
                    p.ext_factor = ext_factor;
                    p.freq_scale = freq_scale;
                    p.sections = sections;
                    b.g.rope(x, pos, f, p)
                });
            }
        }
    }
    // Rope over a view (strided rows), as llama.cpp applies it to a slice of qkv.
    let name = "ROPE(type=f32,ne=[64,4,5,1],n_dims=64,mode=2,view=1)".to_string();
    c.push(Op::Rope, name, 1e-7, |b| {
        let x = b.input(DType::F32, &[64, 4, 5, 1])?;
        let v = b.g.permute(x, [0, 2, 1, 3])?;
        let pos = b.input_with(DType::I32, &[4], Fill::Index(100))?;
        b.g.rope(v, pos, None, RopeParams::new(64, rope_mode::NEOX))
    });
}

/// test-backend-ops' ROPE loops (forward): the model shapes of llama,
/// falcon, stablelm, phi-2, qwen2-vl (m-rope) and its ViT (vision), with
/// and without freq factors, contiguous or a view of a larger tensor, at
/// every freq_scale / ext_factor / attn_factor for the first type and two
/// shapes for the rest.
fn rope_ggml_grid(c: &mut Catalogue) {
    let mut all = true;
    for fs in [1.0f32, 1.4245] {
        for ef in [0.0f32, 0.7465] {
            for af in [1.0f32, 1.4245] {
                for dt in [DType::F32, DType::F16] {
                    for ff in [false, true] {
                        for v in [false, true] {
                            let mut shapes: Vec<([i64; 4], i32, i32)> =
                                vec![([128, 32, 2, 1], 128, rope_mode::NORMAL)];
                            if all {
                                shapes.extend([
                                    ([128, 40, 2, 1], 128, rope_mode::NORMAL),
                                    ([128, 52, 2, 1], 128, rope_mode::NORMAL),
                                    ([128, 64, 2, 1], 128, rope_mode::NORMAL),
                                    ([64, 1, 2, 1], 64, rope_mode::NEOX),
                                    ([64, 71, 2, 1], 64, rope_mode::NEOX),
                                    ([64, 8, 2, 1], 64, rope_mode::NEOX),
                                    ([80, 32, 2, 1], 20, rope_mode::NORMAL),
                                    ([80, 32, 2, 1], 32, rope_mode::NORMAL),
                                    ([80, 32, 4, 1], 32, rope_mode::NORMAL),
                                    ([80, 32, 2, 1], 20, rope_mode::NEOX),
                                    ([80, 32, 2, 1], 32, rope_mode::NEOX),
                                    ([80, 32, 4, 1], 32, rope_mode::NEOX),
                                    ([128, 12, 2, 1], 128, rope_mode::MROPE),
                                    ([128, 28, 2, 1], 128, rope_mode::MROPE),
                                    ([128, 12, 2, 1], 20, rope_mode::MROPE),
                                    ([128, 28, 2, 1], 32, rope_mode::MROPE),
                                    ([80, 16, 2, 1], 80, rope_mode::VISION),
                                ]);
                            }
                            shapes.push(([64, 128, 2, 1], 64, rope_mode::NEOX));
                            for (ne, n_dims, mode) in shapes {
                                push_rope(c, dt, ne, n_dims, mode, fs, ef, af, ff, v as i32);
                            }
                        }
                    }
                    all = false;
                }
            }
        }
    }
}

/// Tokens of the later ROPE grid's second-half views (ggml: 2,457).
const GRID_ROPE_2D_TOKENS: i64 = 61;

/// Tokens of the later ROPE grid's 8,192-token rows when they are a view
/// (v = 1) of a tensor 24 times larger (50 M elements to fill at 8,192).
const GRID_ROPE_VIEW_TOKENS: i64 = 256;

/// The later test-backend-ops' ROPE loops (llama.cpp 0c1e5709), forward:
/// the first grid plus 8,192-token rows (normal, neox, imrope), the
/// Qwen3-VL imrope shapes, a second-half view along dim 0 (clip's
/// build_rope_2d) in every mode at every freq_scale / ext_factor /
/// attn_factor, type and freq factors, and four real-model prefills
/// (Qwen3.5, Gemma 4). Backplane's ROPE has no in-place form: ggml's
/// single in-place case per type / mode / freq factors runs out of place;
/// its rotated-window (n_offs) cases are left out.
fn rope_ggml_grid_views_and_models(c: &mut Catalogue) {
    use rope_mode::{IMROPE, MROPE, NEOX, NORMAL, VISION};
    let mut all = true;
    for fs in [1.0f32, 1.4245] {
        for ef in [0.0f32, 0.7465] {
            for af in [1.0f32, 1.4245] {
                for dt in [DType::F32, DType::F16] {
                    for ff in [false, true] {
                        for v in [0, 1] {
                            let mut shapes: Vec<([i64; 4], i32, i32)> =
                                vec![([128, 32, 2, 1], 128, NORMAL)];
                            if all {
                                shapes.extend([
                                    ([128, 40, 2, 1], 128, NORMAL),
                                    ([128, 52, 2, 1], 128, NORMAL),
                                    ([128, 64, 2, 1], 128, NORMAL),
                                    ([16, 16, 8192, 1], 16, NORMAL),
                                    ([64, 1, 2, 1], 64, NEOX),
                                    ([64, 71, 2, 1], 64, NEOX),
                                    ([64, 8, 2, 1], 64, NEOX),
                                    ([80, 32, 2, 1], 20, NORMAL),
                                    ([80, 32, 2, 1], 32, NORMAL),
                                    ([80, 32, 4, 1], 32, NORMAL),
                                    ([80, 32, 2, 1], 20, NEOX),
                                    ([80, 32, 2, 1], 32, NEOX),
                                    ([80, 32, 4, 1], 32, NEOX),
                                    ([16, 16, 8192, 1], 16, NEOX),
                                    ([128, 12, 2, 1], 128, MROPE),
                                    ([128, 28, 2, 1], 128, MROPE),
                                    ([128, 12, 2, 1], 20, MROPE),
                                    ([128, 28, 2, 1], 32, MROPE),
                                    ([128, 12, 2, 1], 128, IMROPE),
                                    ([128, 28, 2, 1], 128, IMROPE),
                                    ([128, 12, 2, 1], 20, IMROPE),
                                    ([128, 28, 2, 1], 32, IMROPE),
                                    ([80, 16, 2, 1], 80, VISION),
                                    ([128, 16, 2, 1], 128, IMROPE),
                                    ([16, 16, 8192, 1], 16, IMROPE),
                                ]);
                            }
                            shapes.push(([64, 128, 2, 1], 64, NEOX));
                            for (mut ne, n_dims, mode) in shapes {
                                if v == 1 && ne[2] == 8192 {
                                    ne[2] = GRID_ROPE_VIEW_TOKENS;
                                }
                                push_rope(c, dt, ne, n_dims, mode, fs, ef, af, ff, v);
                            }
                        }
                        for mode in [NORMAL, NEOX, MROPE, IMROPE, VISION] {
                            let ne = [36, 16, GRID_ROPE_2D_TOKENS, 1];
                            push_rope(c, dt, ne, 36, mode, fs, ef, af, ff, 2);
                        }
                    }
                    all = false;
                }
            }
        }
    }
    for dt in [DType::F32, DType::F16] {
        for mode in [NORMAL, NEOX, MROPE, IMROPE, VISION] {
            for ff in [false, true] {
                let (fs, ef, af) = (1.4245, 0.7465, 1.4245);
                push_rope(c, dt, [128, 32, 2, 1], 128, mode, fs, ef, af, ff, 0);
                push_rope(c, dt, [128, 32, 2, 1], 128, mode, fs, ef, af, ff, 1);
                push_rope(c, dt, [128, 32, 2, 3], 128, mode, fs, ef, af, ff, 1);
            }
        }
    }
    for (ne, n_dims, mode, ff) in [
        ([256i64, 8, 512, 1], 64, IMROPE, false),
        ([256, 16, 512, 1], 64, IMROPE, false),
        ([256, 8, 512, 1], 256, NEOX, false),
        ([512, 8, 512, 1], 128, NEOX, true),
    ] {
        push_rope(c, DType::F32, ne, n_dims, mode, 1.0, 0.0, 1.0, ff, 0);
    }
}

/// One ROPE case as test-backend-ops' test_rope (forward).
#[allow(clippy::too_many_arguments)]
fn push_rope(
    c: &mut Catalogue,
    dt: DType,
    ne: [i64; 4],
    n_dims: i32,
    mode: i32,
    fs: f32,
    ef: f32,
    af: f32,
    ff: bool,
    v: i32,
) {
    let name = format!(
        "ROPE(type={dt},ne_a=[{}],n_dims={n_dims},mode={mode},n_ctx=512,fs={fs},ef={ef},af={af},ff={ff},v={v})",
        dims(&ne),
    );
    c.push(Op::Rope, name, bound_for(dt), move |b| {
        let uni = Fill::Uniform(-1.0, 1.0);
        let x = if v == 2 {
            // The second half along dim 0 of a twice-wider tensor (a
            // view at a non-zero offset, as clip's build_rope_2d makes).
            let big = b.input_with(dt, &[ne[0] * 2, ne[1], ne[2], ne[3]], uni)?;
            let d = b.g.desc(big);
            let (nb, off) = (d.nb, ne[0] as u64 * dt.type_size() as u64);
            b.g.view(big, &ne, &[nb[1], nb[2], nb[3]], off)?
        } else {
            let grow = if v == 1 { [2, 4, 3, 1] } else { [1; 4] };
            b.strided(dt, ne, grow, [0, 1, 2, 3], uni)?
        };
        let multi = mode & rope_mode::MROPE != 0;
        let n_pos = if multi { ne[2] * 4 } else { ne[2] };
        let pos = b.input_with(DType::I32, &[n_pos], Fill::Index(512))?;
        let f = if ff {
            Some(b.input_with(DType::F32, &[n_dims as i64 / 2], Fill::Uniform(0.9, 1.1))?)
        } else {
            None
        };
        let mut p = if mode == rope_mode::VISION {
            let mut p = RopeParams::new(n_dims / 2, mode);
            p.sections = [n_dims / 4, n_dims / 4, 0, 0];
            p
        } else if multi {
            let mut p = RopeParams::new(n_dims, mode);
            p.sections = [n_dims / 3, n_dims / 3, n_dims / 3, 0];
            p
        } else {
            RopeParams::new(n_dims, mode)
        };
        p.n_ctx_orig = 0;
        p.freq_scale = fs;
        p.ext_factor = ef;
        p.attn_factor = af;
        p.beta_fast = 1.0;
        p.beta_slow = 1.0;
        b.g.rope(x, pos, f, p)
    });
}
