//! The tokenizer type models carry (from backplane-tokenizer).

pub use backplane_tokenizer::Tokenizer;
