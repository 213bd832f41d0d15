//! Splitting text at special tokens before normal tokenization, as llama.cpp's
//! `tokenizer_st_partition`: each special token in turn (longest first) is
//! searched for in every stretch of text still unclaimed, and every
//! occurrence becomes that token.

use std::ops::Range;

use crate::TokenId;

/// A stretch of the input: text still to tokenize, or a special token found in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fragment {
    /// Byte range of the input text.
    Text(Range<usize>),
    /// A special token matched as a whole.
    Token(TokenId),
}

/// Splits `text` at occurrences of the given tokens (`(id, text)`, in matching order).
pub(crate) fn partition<'a>(
    text: &str,
    specials: impl IntoIterator<Item = (TokenId, &'a str)>,
) -> Vec<Fragment> {
    let mut fragments = if text.is_empty() {
        Vec::new()
    } else {
        vec![Fragment::Text(0..text.len())]
    };
    for (id, needle) in specials {
        if needle.is_empty() {
            continue;
        }
        // Cheap rejection: most special tokens never occur in a given prompt.
        let occurs = fragments.iter().any(|fragment| match fragment {
            Fragment::Text(range) => text[range.clone()].contains(needle),
            Fragment::Token(_) => false,
        });
        if !occurs {
            continue;
        }
        let mut next = Vec::with_capacity(fragments.len() + 2);
        for fragment in fragments {
            let Fragment::Text(range) = fragment else {
                next.push(fragment);
                continue;
            };
            let mut rest = range.start;
            while let Some(found) = text[rest..range.end].find(needle) {
                let start = rest + found;
                if start > rest {
                    next.push(Fragment::Text(rest..start));
                }
                next.push(Fragment::Token(id));
                rest = start + needle.len();
            }
            if rest < range.end {
                next.push(Fragment::Text(rest..range.end));
            }
        }
        fragments = next;
    }
    fragments
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_occurrence_becomes_the_token_and_text_between_is_kept() {
        let text = "<s>a<s><s>b<s>";
        let fragments = partition(text, [(7, "<s>")]);
        assert_eq!(
            fragments,
            [
                Fragment::Token(7),
                Fragment::Text(3..4),
                Fragment::Token(7),
                Fragment::Token(7),
                Fragment::Text(10..11),
                Fragment::Token(7),
            ]
        );
    }

    #[test]
    fn longer_token_claims_its_text_before_a_shorter_one_inside_it() {
        let text = "x<|im_end|>y";
        let fragments = partition(text, [(1, "<|im_end|>"), (2, "im")]);
        assert_eq!(
            fragments,
            [
                Fragment::Text(0..1),
                Fragment::Token(1),
                Fragment::Text(11..12)
            ]
        );
    }

    #[test]
    fn empty_text_has_no_fragments() {
        assert!(partition("", [(1, "<s>")]).is_empty());
    }
}
