//! Byte-level BPE (`tokenizer.ggml.model == "gpt2"`): each pre-tokenized word,
//! written in GPT-2's byte alphabet, starts as single characters and the
//! adjacent pair with the lowest merge rank is joined until no listed merge applies.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::collections::HashMap;

use crate::{TokenId, Vocabulary};

/// Merge ranks from `tokenizer.ggml.merges` ("left right", lower line = earlier merge).
#[derive(Debug, Default)]
pub(crate) struct MergeRanks {
    /// Every text that appears on either side of a merge, numbered.
    part_ids: HashMap<String, u32>,
    /// (left part, right part) -> rank.
    ranks: HashMap<(u32, u32), u32>,
}

impl MergeRanks {
    /// Reads merge lines as llama.cpp does: split at the first space after the
    /// first byte (so a part may itself begin with a space); a line without
    /// such a space is no merge; the first of two equal lines keeps its rank.
    pub(crate) fn new(merges: &[String]) -> MergeRanks {
        let mut table = MergeRanks::default();
        for (rank, line) in merges.iter().enumerate() {
            let bytes = line.as_bytes();
            let space = bytes.iter().skip(1).position(|&b| b == b' ');
            let Some(split) = space.map(|i| i + 1) else {
                continue;
            };
            let (left, right) = (&line[..split], &line[split + 1..]);
            let left = table.intern(left);
            let right = table.intern(right);
            let rank = u32::try_from(rank).unwrap_or(u32::MAX);
            table.ranks.entry((left, right)).or_insert(rank);
        }
        table
    }

    fn intern(&mut self, part: &str) -> u32 {
        if let Some(&id) = self.part_ids.get(part) {
            return id;
        }
        let id = u32::try_from(self.part_ids.len()).unwrap_or(u32::MAX);
        self.part_ids.insert(part.to_owned(), id);
        id
    }

    /// The rank of merging `left` with `right`, if that merge is listed.
    pub(crate) fn rank(&self, left: &str, right: &str) -> Option<u32> {
        let left = *self.part_ids.get(left)?;
        let right = *self.part_ids.get(right)?;
        self.ranks.get(&(left, right)).copied()
    }
}

#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bigram {
    left: usize,
    right: usize,
    rank: u32,
    len: usize,
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// Max-heap order: the lowest rank first, on a tie the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Merges one byte-level-encoded word and appends its token ids to `out`.
///
/// A final piece that is not a token is written byte by byte, each byte of its
/// UTF-8 looked up as a one-byte token; bytes with no such token are dropped,
/// exactly as llama.cpp does.
pub(crate) fn tokenize_word(
    vocab: &Vocabulary,
    merges: &MergeRanks,
    ignore_merges: bool,
    word: &str,
    out: &mut Vec<TokenId>,
) {
    if ignore_merges && let Some(id) = vocab.id_of(word) {
        out.push(id);
        return;
    }
    let mut symbols: Vec<Symbol> = Vec::with_capacity(word.len());
    for (start, ch) in word.char_indices() {
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
    let text_of = |s: Symbol| &word[s.start..s.start + s.len];
    let try_add =
        |queue: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize, right: usize| {
            let (l, r) = (symbols[left], symbols[right]);
            if let Some(rank) = merges.rank(text_of(l), text_of(r)) {
                queue.push(Bigram {
                    left,
                    right,
                    rank,
                    len: l.len + r.len,
                });
            }
        };
    let mut queue = BinaryHeap::new();
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

    let mut cursor = if symbols.is_empty() { None } else { Some(0) };
    while let Some(index) = cursor {
        let symbol = symbols[index];
        let piece = text_of(symbol);
        match vocab.id_of(piece) {
            Some(id) => out.push(id),
            None => {
                for byte in piece.bytes() {
                    if let Some(id) = std::str::from_utf8(&[byte])
                        .ok()
                        .and_then(|s| vocab.id_of(s))
                    {
                        out.push(id);
                    }
                }
            }
        }
        cursor = symbol.next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_line_splits_at_first_space_after_first_byte() {
        let merges = MergeRanks::new(&[
            "a b".to_owned(),
            " x y".to_owned(),
            "Ġ h".to_owned(),
            "nospace".to_owned(),
            "a b".to_owned(),
        ]);
        assert_eq!(
            merges.rank("a", "b"),
            Some(0),
            "first duplicate keeps its rank"
        );
        assert_eq!(merges.rank(" x", "y"), Some(1));
        assert_eq!(
            merges.rank("Ġ", "h"),
            Some(2),
            "split after a multi-byte first character"
        );
        assert_eq!(merges.rank("b", "a"), None);
        assert_eq!(merges.ranks.len(), 3);
    }
}
