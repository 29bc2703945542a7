//! Raw text to token ids without the GIL: Hugging Face tokenizers' own Rust crate, called on a
//! run of documents at once, its ids written straight into one flat buffer.

pub mod checked;
pub mod limits;
pub mod precheck;
pub mod tokenize;
