//! A `tokenizer.json` read for `limits` before anything loads it: its normalizer, and the
//! largest id of its vocabulary and of its added tokens, in one pass over the text.
//!
//! Both builds use it: this core's copy (`tokenize::TextTokenizer::from_json`) and, through
//! `stoker._native.check_tokenizer_json`, the Python package, which already normalizes the added
//! tokens while it loads a file. The vocabulary is not held: each id is looked at as it is read.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::limits;

/// What the checks read of a file; every other field is skipped unread.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    normalizer: Value,
    #[serde(default)]
    model: ModelHead,
    #[serde(default)]
    added_tokens: LargestId,
}

/// The largest id of a model's vocabulary (`"model": {"vocab": ..}`).
#[derive(Default)]
struct ModelHead {
    vocab: LargestId,
}

/// The largest id of a vocabulary (`{token: id}`), or of a list of added tokens
/// (`[{"id": ..}, ..]`); a Unigram's list of `[token, score]` pairs gives its ids by place.
/// Anything else counts 0: the checks bound what a file asks for, its loader refuses the rest.
#[derive(Default)]
struct LargestId(u64);

impl<'de> Deserialize<'de> for ModelHead {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ModelVisitor)
    }
}

struct ModelVisitor;

impl<'de> Visitor<'de> for ModelVisitor {
    type Value = ModelHead;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a model")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ModelHead, A::Error> {
        let mut head = ModelHead::default();
        while let Some(key) = map.next_key::<String>()? {
            if key == "vocab" {
                head.vocab = map.next_value()?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(head)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ModelHead, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(ModelHead::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<ModelHead, E> {
        Ok(ModelHead::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<ModelHead, E> {
        Ok(ModelHead::default())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<ModelHead, E> {
        Ok(ModelHead::default())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<ModelHead, E> {
        Ok(ModelHead::default())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<ModelHead, E> {
        Ok(ModelHead::default())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<ModelHead, E> {
        Ok(ModelHead::default())
    }
}

impl<'de> Deserialize<'de> for LargestId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LargestIdVisitor)
    }
}

struct LargestIdVisitor;

/// An entry's id, where it has one: a number, or an object's `"id"`.
fn id_of(value: &Value) -> u64 {
    value.as_u64().or_else(|| value.get("id").and_then(Value::as_u64)).unwrap_or(0)
}

impl<'de> Visitor<'de> for LargestIdVisitor {
    type Value = LargestId;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a vocabulary or a list of tokens")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LargestId, A::Error> {
        let mut largest = 0;
        while let Some((_, id)) = map.next_entry::<IgnoredAny, Value>()? {
            largest = largest.max(id_of(&id));
        }
        Ok(LargestId(largest))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LargestId, A::Error> {
        let (mut largest, mut count) = (0, 0_u64);
        while let Some(entry) = seq.next_element::<Value>()? {
            largest = largest.max(id_of(&entry));
            count += 1;
        }
        // A list of [token, score] pairs: ids 0 to count - 1.
        Ok(LargestId(largest.max(count.saturating_sub(1))))
    }

    fn visit_unit<E: de::Error>(self) -> Result<LargestId, E> {
        Ok(LargestId(0))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<LargestId, E> {
        Ok(LargestId(0))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<LargestId, E> {
        Ok(LargestId(0))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<LargestId, E> {
        Ok(LargestId(0))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<LargestId, E> {
        Ok(LargestId(0))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<LargestId, E> {
        Ok(LargestId(0))
    }
}

/// Refuse a `tokenizer.json` (its text) past `limits`: normalizers that grow a text past
/// `MAX_GROWTH` times, a token id past `MAX_TOKEN_ID`.
///
/// # Errors
/// Not JSON, or the limit passed (the message says which).
pub fn check_file(json: &str) -> Result<(), String> {
    let head: Head = serde_json::from_str(json).map_err(|error| format!("not a tokenizer's JSON: {error}"))?;
    limits::check_growth(&head.normalizer)?;
    limits::check_largest_id(head.model.vocab.0.max(head.added_tokens.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_largest_id_is_found_in_the_vocabulary_and_the_added_tokens() {
        let file = |vocab: Value, added: Value| json!({"model": {"type": "BPE", "vocab": vocab}, "added_tokens": added}).to_string();
        assert!(check_file(&file(json!({"a": 0, "b": 4_194_304}), json!([{"id": 2, "content": "x"}]))).is_ok());
        let error = check_file(&file(json!({"a": 0, "b": 1_000_000_000}), json!([]))).unwrap_err();
        assert!(error.contains("a token id of 1000000000"), "{error}");
        assert!(check_file(&file(json!({"a": 0}), json!([{"id": 4_294_967_295_u64, "content": "x"}]))).is_err());
        // A Unigram's vocabulary: ids by place.
        assert!(check_file(&file(json!([["a", -1.0], ["b", -2.0]]), json!(null))).is_ok());
        assert!(check_file(&json!({"model": null, "normalizer": null}).to_string()).is_ok());
        assert!(check_file("{\"model\": 3, \"added_tokens\": \"x\"}").is_ok()); // no ids: for its loader to refuse
        assert!(check_file("[1, 2").is_err());
    }

    #[test]
    fn the_normalizer_is_checked_from_the_same_pass() {
        let step = json!({"type": "Replace", "pattern": {"String": ""}, "content": "ab"});
        let file = json!({"normalizer": {"type": "Sequence", "normalizers": vec![step; 8]}, "model": {"vocab": {}}}).to_string();
        assert!(check_file(&file).unwrap_err().contains("6561 times"));
    }
}
