//! What a caller adds to the one-column mat-vec (the epilogue of
//! `ops::epilogue`).

use backplane_shaders::PipelineKey;

use crate::encode::{Binding, Params};

/// What a caller adds to the mat-vec of one column (`EPILOGUE` in
/// `mul_mat_vec.wgsl`, built by `ops::epilogue`): defines and types, the
/// bindings after the mat-vec's three, the parameter words after its own,
/// and the node + 1 its error reports name.
pub(crate) struct MatVecExtra {
    /// Holds only the added defines and types.
    pub key: PipelineKey,
    pub bindings: Vec<Binding>,
    pub words: Params,
    pub node1: u32,
}

impl MatVecExtra {
    /// `key` with the added defines and types.
    pub(super) fn specialise(&self, mut key: PipelineKey) -> PipelineKey {
        key.defines.extend(self.key.defines.iter().cloned());
        key.types.extend(self.key.types.iter().cloned());
        key
    }

    /// `p` (the mat-vec's words) followed by the added ones.
    pub(super) fn params(&self, mut p: Params) -> Params {
        for &w in self.words.words() {
            p = p.u32(w);
        }
        p
    }
}

/// Storage bindings of the mat-vec before a [`MatVecExtra`]'s: weights,
/// activations, dst.
pub(crate) const MATVEC_BINDINGS: usize = 3;
