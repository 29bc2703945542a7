//! Explicit I/O for storage backends: coalesced positional reads (LMDBIO's coalescing).

pub mod byte_locks;
pub mod cache_entries;
pub mod cache_files;
pub mod cache_index;
pub mod cache_layout;
pub mod cache_writes;
pub mod checksum;
pub mod coalesce;
pub mod key_hash;
pub mod listing;
pub mod read;
