//! `TextTokenizer`: a `tokenizer.json` loaded by the `tokenizers` crate (the library the Python
//! `tokenizers` package binds), encoding many documents at once into one flat `u32` buffer.
//!
//! The Python package returns one `Encoding` object per document and a Python list per
//! document's ids, built while holding the GIL: about 8% of the time of the call itself on web
//! text. Here the ids go from the crate's encodings into one `Vec<u32>` with the GIL released.

use std::str::FromStr;

use tokenizers::Tokenizer;

/// A loaded tokenizer and the marks it puts around every document.
pub struct TextTokenizer {
    inner: Tokenizer,
    add_special_tokens: bool,
    bos: Option<u32>,
    eos: Option<u32>,
}

/// Ids back to back, and each document's length (its marks included).
pub struct Encoded {
    pub ids: Vec<u32>,
    pub lengths: Vec<i64>,
}

impl TextTokenizer {
    /// Load a tokenizer from the text of a `tokenizer.json`.
    ///
    /// # Errors
    /// The JSON is not a tokenizer this crate version reads (the message says why).
    pub fn from_json(json: &str, add_special_tokens: bool, bos: Option<u32>, eos: Option<u32>) -> Result<Self, String> {
        let inner = Tokenizer::from_str(json).map_err(|error| error.to_string())?;
        Ok(TextTokenizer { inner, add_special_tokens, bos, eos })
    }

    /// Token ids of `texts`, `bos` and `eos` around each: the crate's batch encode (spread over
    /// its thread pool unless `TOKENIZERS_PARALLELISM` turns that off), then one copy into a flat
    /// buffer sized before it is filled.
    ///
    /// # Errors
    /// The tokenizer's own error (a normalizer or pre-tokenizer that fails on this input).
    pub fn encode(&self, texts: &[String]) -> Result<Encoded, String> {
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self.inner.encode_batch_fast(inputs, self.add_special_tokens).map_err(|error| error.to_string())?;
        let extra = usize::from(self.bos.is_some()) + usize::from(self.eos.is_some());
        let total: usize = encodings.iter().map(|encoding| encoding.get_ids().len() + extra).sum();
        let mut ids = Vec::with_capacity(total);
        let mut lengths = Vec::with_capacity(encodings.len());
        for encoding in &encodings {
            ids.extend(self.bos);
            ids.extend_from_slice(encoding.get_ids());
            ids.extend(self.eos);
            lengths.push((encoding.get_ids().len() + extra) as i64);
        }
        Ok(Encoded { ids, lengths })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word-level tokenizer small enough to write here: whitespace pre-tokenizer, five words.
    const WORDS: &str = r#"{
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "the": 1, "cat": 2, "sat": 3, "<eos>": 4}, "unk_token": "[UNK]"}
    }"#;

    #[test]
    fn ids_come_back_to_back_with_the_marks_and_lengths() {
        let tokenizer = TextTokenizer::from_json(WORDS, false, None, Some(4)).unwrap();
        let encoded = tokenizer.encode(&["the cat sat".to_string(), String::new(), "dog the".to_string()]).unwrap();
        assert_eq!(encoded.ids, vec![1, 2, 3, 4, 4, 0, 1, 4]);
        assert_eq!(encoded.lengths, vec![4, 1, 3]);
    }

    #[test]
    fn a_json_that_is_no_tokenizer_is_an_error_not_a_panic() {
        assert!(TextTokenizer::from_json("{\"model\": 3}", false, None, None).is_err());
        assert!(TextTokenizer::from_json("not json", false, None, None).is_err());
    }
}
