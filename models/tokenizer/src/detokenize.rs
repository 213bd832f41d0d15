//! llama.cpp's `llama_detokenize`: pieces joined, with its leading-space and
//! space-cleaning rules.

use crate::{TokenId, Tokenizer};

pub(crate) fn detokenize(
    tokenizer: &Tokenizer,
    mut ids: &[TokenId],
    remove_special: bool,
    unparse_special: bool,
) -> String {
    let mut strip_leading_space = tokenizer.add_space_prefix;
    if remove_special
        && tokenizer.add_bos
        && let Some((&first, rest)) = ids.split_first()
        && Some(first) == tokenizer.special.bos
    {
        strip_leading_space = false;
        ids = rest;
    }
    if remove_special
        && tokenizer.add_eos
        && let Some((&last, rest)) = ids.split_last()
        && Some(last) == tokenizer.special.eos
    {
        ids = rest;
    }
    let mut text = Vec::with_capacity(ids.len() * 4);
    for &id in ids {
        let piece = if unparse_special {
            tokenizer.piece_with_special(id)
        } else {
            tokenizer.piece_bytes(id)
        };
        let piece = match piece {
            [b' ', rest @ ..] if strip_leading_space => rest,
            whole => whole,
        };
        strip_leading_space = false;
        text.extend_from_slice(piece);
    }
    if tokenizer.clean_spaces {
        text = clean_spaces(&text);
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// The three passes of llama.cpp's `clean_spaces`: no space before `?!.,`;
/// `a ' b` -> `a'b`; no space before `'s`, `'m`, `'re`, `'ve`.
fn clean_spaces(text: &[u8]) -> Vec<u8> {
    let Some((&first, _)) = text.split_first() else {
        return Vec::new();
    };

    let mut pass1 = vec![first];
    for pair in text.windows(2) {
        let (prev, x) = (pair[0], pair[1]);
        if prev == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            pass1.pop();
        }
        pass1.push(x);
    }

    // The space after a lone apostrophe is dropped and reads as NUL to the next check.
    let mut src = pass1;
    let mut pass2 = vec![src[0]];
    let mut i = 1;
    while i < src.len() {
        let x = src[i];
        if x == b'\'' && i + 1 < src.len() && src[i - 1] == b' ' && src[i + 1] == b' ' {
            pass2.pop();
            i += 1;
            src[i] = 0;
        }
        pass2.push(x);
        i += 1;
    }

    let src = pass2;
    let mut pass3 = vec![src[0]];
    for i in 1..src.len() {
        let x = src[i];
        if src[i - 1] == b' ' && x == b'\'' && i + 1 < src.len() {
            let x1 = src[i + 1];
            let x2 = src.get(i + 2).copied();
            let drop_space = matches!(x1, b's' | b'm')
                || (x1 != b't'
                    && x1 != b'd'
                    && matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e'))));
            if drop_space {
                pass3.pop();
            }
        }
        pass3.push(x);
    }
    pass3
}

#[cfg(test)]
mod tests {
    use super::clean_spaces;

    #[test]
    fn clean_spaces_tidies_punctuation_and_contractions_like_llama_cpp() {
        assert_eq!(clean_spaces(b"Hello , world !"), b"Hello, world!");
        assert_eq!(clean_spaces(b"rock ' n"), b"rock'n");
        assert_eq!(clean_spaces(b"it 's we 're I 'd"), b"it's we're I 'd");
        assert_eq!(clean_spaces(b""), b"");
    }
}
