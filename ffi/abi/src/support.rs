//! Helpers for writing `supports_op` and kernels' argument checks: resolve
//! a node's sources and check types, with reasons worded for users; and
//! the plugin-boundary checks every backend shares ([`memory`]); typed
//! backend options ([`options`]); the wording of what a backend does not
//! implement ([`not_implemented`]).

pub mod memory;
pub mod options;

pub use crate::contract::sources;
use crate::contract::{type_list, wording};
use crate::{DType, TensorDesc};

/// The type of `d`, or the reason it is unknown.
pub fn dtype(d: &TensorDesc) -> Result<DType, String> {
    d.dtype().map_err(|e| e.to_string())
}

/// Requires `d`'s type to be one of the `allowed` ones a backend
/// implements; the refusal is worded as the op contract's
/// ("src0: expected type f32 or f16 (implemented here), found q5_1").
pub fn want_type(what: &str, d: &TensorDesc, allowed: &[DType]) -> Result<DType, String> {
    let t = dtype(d)?;
    if allowed.contains(&t) {
        Ok(t)
    } else {
        Err(implemented_types(what, t, allowed))
    }
}

/// The refusal of a type a backend does not implement, in the contract's
/// wording: "src0: expected type f32 or f16 (implemented here), found q5_1".
pub fn implemented_types(what: &str, found: DType, allowed: &[DType]) -> String {
    wording(
        what,
        &format!("{} (implemented here)", type_list(allowed)),
        found.name(),
    )
}

/// The refusal of something a backend has no kernel for (an op, a mode of
/// one, a type pair), worded one way by every backend:
/// "ARGMAX is not implemented by the SYCL backend". `backend` is the name
/// users know the backend by (`SYCL`, `Hexagon`); `what` names the op, or
/// the op and what of it is missing ("ROPE mode mrope").
pub fn not_implemented(backend: &str, what: impl std::fmt::Display) -> String {
    format!("{what} is not implemented by the {backend} backend")
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
        assert_eq!(
            e,
            "src0: expected type f32 or f16 (implemented here), found q5_1"
        );
        assert_eq!(want_type("dst", &g[1], &[DType::F32]), Ok(DType::F32));
    }

    #[test]
    fn not_implemented_names_the_op_and_the_backend() {
        assert_eq!(
            not_implemented("SYCL", crate::Op::Argmax),
            "ARGMAX is not implemented by the SYCL backend"
        );
        assert_eq!(
            not_implemented("Hexagon", "ROPE mode 8"),
            "ROPE mode 8 is not implemented by the Hexagon backend"
        );
    }
}
