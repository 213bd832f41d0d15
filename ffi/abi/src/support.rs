//! Helpers for writing `supports_op` and kernels' argument checks: resolve
//! a node's sources and check types, with reasons worded for users.

use crate::{DType, MAX_SRC, TensorDesc};

/// The sources of `d` as descriptors of `graph` (`None` for absent slots);
/// an error names a source index outside the graph.
pub fn sources<'g>(
    graph: &'g [TensorDesc],
    d: &TensorDesc,
) -> Result<[Option<&'g TensorDesc>; MAX_SRC], String> {
    let mut src = [None; MAX_SRC];
    for (i, &s) in d.src.iter().enumerate() {
        if s >= 0 {
            src[i] = Some(
                graph
                    .get(s as usize)
                    .ok_or_else(|| format!("source {i} index {s} out of range"))?,
            );
        }
    }
    Ok(src)
}

/// The type of `d`, or the reason it is unknown.
pub fn dtype(d: &TensorDesc) -> Result<DType, String> {
    d.dtype().map_err(|e| e.to_string())
}

/// Requires `d`'s type to be one of `allowed`; the refusal names `what`,
/// the type and the allowed ones ("src0 type q5_1 not implemented (have
/// f32, f16)").
pub fn want_type(what: &str, d: &TensorDesc, allowed: &[DType]) -> Result<DType, String> {
    let t = dtype(d)?;
    if allowed.contains(&t) {
        Ok(t)
    } else {
        let names: Vec<&str> = allowed.iter().map(|t| t.name()).collect();
        Err(format!(
            "{what} type {} not implemented (have {})",
            t.name(),
            names.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_source_and_types() {
        let mut g = vec![TensorDesc::new(DType::Q5_1, [4, 1, 1, 1])];
        let mut d = TensorDesc::new(DType::F32, [4, 1, 1, 1]);
        d.src[0] = 0;
        d.src[1] = 7;
        g.push(d);
        assert_eq!(
            sources(&g, &g[1]).unwrap_err(),
            "source 1 index 7 out of range"
        );
        let e = want_type("src0", &g[0], &[DType::F32, DType::F16]).unwrap_err();
        assert_eq!(e, "src0 type q5_1 not implemented (have f32, f16)");
        assert_eq!(want_type("dst", &g[1], &[DType::F32]), Ok(DType::F32));
    }
}
