//! `TextTokenizer`: a `tokenizer.json` loaded by the `tokenizers` crate (the library the Python
//! `tokenizers` package binds), encoding many documents at once into one flat `u32` buffer.
//!
//! The Python package returns one `Encoding` object per document and a Python list per
//! document's ids, built while holding the GIL: about 8% of the time of the call itself on web
//! text. Here the ids go from the crate's encodings into one `Vec<u32>` with the GIL released.
//!
//! The file is checked before it is loaded (`precheck` and `limits`: what its normalizers, ids,
//! padding and truncation may ask of memory), and its regex parts match through `checked`, so a regex that
//! gives up on a document is that document's error.

use tokenizers::{DecoderWrapper, ModelWrapper, PostProcessor, PostProcessorWrapper, TokenizerImpl};

use super::checked::{CheckedNormalizer, CheckedPreTokenizer};
use super::{limits, precheck};

/// The crate's tokenizer with the checked regex parts.
type Checked = TokenizerImpl<ModelWrapper, CheckedNormalizer, CheckedPreTokenizer, PostProcessorWrapper, DecoderWrapper>;

/// A loaded tokenizer and the marks it puts around every document.
pub struct TextTokenizer {
    inner: Checked,
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
    /// Load a tokenizer from the text of a `tokenizer.json`, its limits checked first.
    ///
    /// # Errors
    /// The JSON is not a tokenizer this crate version reads, or asks for more than `limits`
    /// allows (the message says why).
    pub fn from_json(json: &str, add_special_tokens: bool, bos: Option<u32>, eos: Option<u32>) -> Result<Self, String> {
        precheck::check_file(json)?;
        let inner: Checked = serde_json::from_str(json).map_err(|error| error.to_string())?;
        let special_tokens = match inner.get_post_processor() {
            Some(processor) if add_special_tokens => processor.added_tokens(false),
            _ => 0,
        };
        limits::check_lengths(inner.get_padding(), inner.get_truncation(), special_tokens)?;
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

    fn changed(change: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut tokenizer: serde_json::Value = serde_json::from_str(WORDS).unwrap();
        change(&mut tokenizer);
        tokenizer.to_string()
    }

    #[test]
    fn sizes_past_the_limits_are_refused_when_loaded() {
        let padded = changed(|tokenizer| {
            tokenizer["padding"] = serde_json::json!({"strategy": {"Fixed": 1_000_000_000}, "direction": "Right", "pad_to_multiple_of": null,
                "pad_id": 0, "pad_type_id": 0, "pad_token": "[UNK]"});
        });
        assert!(TextTokenizer::from_json(&padded, false, None, None).err().unwrap().contains("padding to 1000000000 tokens"));
        let strided = changed(|tokenizer| {
            tokenizer["truncation"] = serde_json::json!({"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 10});
        });
        assert!(TextTokenizer::from_json(&strided, false, None, None).err().unwrap().contains("stride of 10"));
        let growing = changed(|tokenizer| {
            let step = serde_json::json!({"type": "Replace", "pattern": {"String": ""}, "content": "ab"});
            tokenizer["normalizer"] = serde_json::json!({"type": "Sequence", "normalizers": vec![step; 8]});
        });
        assert!(TextTokenizer::from_json(&growing, false, None, None).err().unwrap().contains("6561 times"));
    }

    #[test]
    fn a_regex_that_gives_up_fails_its_document_alone() {
        let splitting = changed(|tokenizer| {
            tokenizer["pre_tokenizer"] = serde_json::json!({"type": "Split", "pattern": {"Regex": "(a|aa)+(?=b)|x"}, "behavior": "Isolated",
                "invert": false});
        });
        let tokenizer = TextTokenizer::from_json(&splitting, false, None, None).unwrap();
        let hostile = "a".repeat(41);
        assert!(tokenizer.encode(&[hostile, "the".to_string()]).err().unwrap().contains("gave up"));
        assert_eq!(tokenizer.encode(&["the".to_string()]).unwrap().lengths, vec![1]);
    }
}
