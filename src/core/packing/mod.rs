//! Packing tokenized documents into rows of a context length (the padding tax, Data Journey §5).

pub mod packer;
pub mod row;
