//! SentencePiece-style tokenization (`tokenizer.ggml.model == "llama"`): start
//! from single characters and keep merging the adjacent pair whose joined
//! text is the highest-scoring token; whatever is left that is not a token
//! falls back to `<0xNN>` byte tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::{TokenId, TokenizerError, Vocabulary};

/// One run of text in the merge chain: a byte range of the input plus links
/// to its live neighbours. A symbol absorbed by its left neighbour has `len == 0`.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of two adjacent symbols.
#[derive(Debug, Clone, Copy)]
struct Bigram {
    left: usize,
    right: usize,
    score: f32,
    /// Byte length of the joined text when the candidate was made; a later
    /// mismatch means one side has changed since and the candidate is stale.
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// Max-heap order: the higher score first, on a tie the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Tokenizes `text` (spaces already escaped to U+2581) and appends the ids to `out`.
pub(crate) fn tokenize(
    vocab: &Vocabulary,
    text: &str,
    out: &mut Vec<TokenId>,
) -> Result<(), TokenizerError> {
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    for (start, ch) in text.char_indices() {
        let index = symbols.len();
        symbols.push(Symbol {
            start,
            len: ch.len_utf8(),
            prev: index.checked_sub(1),
            next: None,
        });
        if let Some(prev) = index.checked_sub(1) {
            symbols[prev].next = Some(index);
        }
    }
    if symbols.is_empty() {
        return Ok(());
    }

    let mut queue = BinaryHeap::new();
    let try_add =
        |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize, right: usize| {
            let (l, r) = (symbols[left], symbols[right]);
            let joined = &text[l.start..r.start + r.len];
            if let Some(id) = vocab.id_of(joined) {
                queue.push(Bigram {
                    left,
                    right,
                    score: vocab.score(id),
                    len: joined.len(),
                });
            }
        };
    for right in 1..symbols.len() {
        try_add(&mut queue, &symbols, right - 1, right);
    }

    while let Some(bigram) = queue.pop() {
        let (left, right) = (symbols[bigram.left], symbols[bigram.right]);
        if left.len == 0 || right.len == 0 || left.len + right.len != bigram.len {
            continue;
        }
        symbols[bigram.left].len += right.len;
        symbols[bigram.right].len = 0;
        symbols[bigram.left].next = right.next;
        if let Some(after) = right.next {
            symbols[after].prev = Some(bigram.left);
        }
        if let Some(before) = left.prev {
            try_add(&mut queue, &symbols, before, bigram.left);
        }
        if let Some(after) = right.next {
            try_add(&mut queue, &symbols, bigram.left, after);
        }
    }

    let mut cursor = Some(0);
    while let Some(index) = cursor {
        let symbol = symbols[index];
        let piece = &text[symbol.start..symbol.start + symbol.len];
        match vocab.id_of(piece) {
            Some(id) => out.push(id),
            None => {
                for (i, byte) in piece.bytes().enumerate() {
                    let id =
                        vocab
                            .spm_byte_token(byte)
                            .ok_or(TokenizerError::MissingByteToken {
                                byte,
                                offset: symbol.start + i,
                            })?;
                    out.push(id);
                }
            }
        }
        cursor = symbol.next;
    }
    Ok(())
}
