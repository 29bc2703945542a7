//! The node cache's index: an open-addressing hash table of slots (`cache_layout::Slot`) in the
//! `index` file after the state's two copies, read and written with positional I/O.
//!
//! A name's slot is found by linear probing from its hash's home; a probe stops at an empty slot
//! or after `MOST_PROBES` (a damaged index full of bytes cannot make a look-up long). Slots are
//! never emptied: an entry's slot goes stale when its segment is removed (`State::holds`), and a
//! writer reuses stale slots. When more than half the slots are used, the writer rebuilds the
//! index into a new file with only the slots of held segments (`rebuild`), so stale ones never
//! pile up. Readers take no lock: a slot torn by a concurrent write, stale, or damaged leads to a
//! record that fails its checks (`cache_layout::check_record`), which is a miss.

use std::fs::File;
use std::io;

use super::cache_files::{read_at, write_at, Folder};
use super::cache_layout::{Slot, State, FEWEST_SLOTS, MOST_SLOTS, SLOTS_AT, SLOT_BYTES};

/// Slots a look-up or an insertion reads at most.
pub const MOST_PROBES: u64 = 512;
/// Slots read in one call.
const CHUNK: u64 = 32;

/// Whether a probe goes on past a slot.
pub enum Probe {
    Next,
    Stop,
}

/// Visit the slots of `hash`'s probe chain in an index of `capacity` slots, in order, with their
/// positions, until `visit` stops, a slot is empty (visited too), or `MOST_PROBES` were read.
/// Bytes past the file's end read as empty slots.
pub fn probe(index: &File, capacity: u64, hash: u64, mut visit: impl FnMut(u64, &Slot) -> Probe) -> io::Result<()> {
    let mask = capacity - 1;
    let mut position = hash & mask;
    let mut seen = 0u64;
    let mut buffer = [0u8; (CHUNK * SLOT_BYTES) as usize];
    while seen < MOST_PROBES.min(capacity) {
        let count = CHUNK.min(capacity - position).min(MOST_PROBES.min(capacity) - seen);
        let wanted = (count * SLOT_BYTES) as usize;
        let read = read_at(index, &mut [&mut buffer[..wanted]], SLOTS_AT + position * SLOT_BYTES)?;
        buffer[read..wanted].fill(0);
        for at in 0..count {
            let slot = Slot::decode(&buffer[(at * SLOT_BYTES) as usize..]);
            if let Probe::Stop = visit(position + at, &slot) {
                return Ok(());
            }
            if slot.hash == 0 {
                return Ok(());
            }
        }
        seen += count;
        position = (position + count) & mask;
    }
    Ok(())
}

/// Where `hash`'s entry goes in the index of `state`.
pub struct Place {
    pub position: u64,
    /// The slot there now, if it holds `hash`'s current entry (replaced: its segment has one
    /// live entry fewer).
    pub replaced: Option<Slot>,
    /// The slot was empty (one more slot used).
    pub was_empty: bool,
}

/// The slot `hash`'s entry goes in: its current one, else the first stale or empty slot of its
/// chain; None when the chain has neither within `MOST_PROBES` (the index must be rebuilt).
pub fn place(index: &File, state: &State, hash: u64) -> io::Result<Option<Place>> {
    let mut current = None;
    let mut free: Option<(u64, bool)> = None;
    probe(index, state.capacity, hash, |position, slot| {
        if slot.hash == hash && state.holds(slot) {
            current = Some(Place { position, replaced: Some(*slot), was_empty: false });
            return Probe::Stop;
        }
        if free.is_none() && !state.holds(slot) {
            free = Some((position, slot.hash == 0));
        }
        Probe::Next
    })?;
    Ok(current.or(free.map(|(position, was_empty)| Place { position, replaced: None, was_empty })))
}

/// Write `slot` at `position`.
pub fn write_slot(index: &File, position: u64, slot: &Slot) -> io::Result<()> {
    write_at(index, &[&slot.encode()], SLOTS_AT + position * SLOT_BYTES)
}

/// The slots an index for `live` entries has: four times as many (a rebuilt index is a quarter
/// full), a power of two, at least `FEWEST_SLOTS`.
pub fn capacity_for(live: u64) -> u64 {
    live.saturating_mul(4).clamp(FEWEST_SLOTS, MOST_SLOTS).next_power_of_two()
}

/// An empty index file of `state.capacity` slots at `name` in `folder` (made anew), holding
/// `state` in both copies.
pub fn create(folder: &Folder, name: &str, state: &State) -> io::Result<File> {
    let file = folder.create_new(name)?;
    file.set_len(SLOTS_AT + state.capacity * SLOT_BYTES)?;
    let copy = state.encode();
    write_at(&file, &[&copy, &copy], 0)?;
    Ok(file)
}

/// Visit each slot of `old` (the index of `state`) that names an entry of a held segment and
/// fits within it, reading the table in large chunks.
fn held_slots(old: &File, state: &State, mut visit: impl FnMut(&Slot) -> io::Result<()>) -> io::Result<()> {
    let mut buffer = vec![0u8; (4096 * SLOT_BYTES) as usize];
    let mut position = 0u64;
    while position < state.capacity {
        let count = (state.capacity - position).min(4096);
        let wanted = (count * SLOT_BYTES) as usize;
        let read = read_at(old, &mut [&mut buffer[..wanted]], SLOTS_AT + position * SLOT_BYTES)?;
        buffer[read..wanted].fill(0);
        for at in 0..count as usize {
            let slot = Slot::decode(&buffer[at * SLOT_BYTES as usize..]);
            let fits = state
                .segment(slot.segment)
                .is_some_and(|segment| slot.offset.checked_add(slot.length).is_some_and(|end| end <= segment.bytes));
            if state.holds(&slot) && fits {
                visit(&slot)?;
            }
        }
        position += count;
    }
    Ok(())
}

/// A new index at `name` in `folder` holding the slots of `old` (the index of `state`) that name
/// an entry of a held segment, in a table sized for them; `state` is updated to describe it
/// (capacity, slots used, each segment's live entries counted again).
///
/// The slots are sorted by home and laid out in one pass (each at its home or just after the one
/// before: a valid linear-probing table; the few that run past the end continue at the first
/// free slots from the start), then written in order, a chunk at a time: a few sequential
/// writes, where a write a slot took 2 s at a million entries. Memory: 40 bytes a slot held
/// (bounded by the old index's own size).
pub fn rebuild(folder: &Folder, name: &str, old: &File, state: &mut State) -> io::Result<File> {
    let mut held = Vec::new();
    held_slots(old, state, |slot| {
        held.push(*slot);
        Ok(())
    })?;
    let mut fresh = State { capacity: capacity_for(held.len() as u64), used: held.len() as u64, superseded: false, ..state.clone() };
    let mask = fresh.capacity - 1;
    held.sort_unstable_by_key(|slot| slot.hash & mask);
    let mut placed: Vec<(u64, Slot)> = Vec::with_capacity(held.len());
    let mut past_the_end = Vec::new();
    let mut next = 0u64;
    for slot in held {
        let position = (slot.hash & mask).max(next);
        if position >= fresh.capacity {
            past_the_end.push(slot);
        } else {
            placed.push((position, slot));
            next = position + 1;
        }
    }
    // Those that ran past the end: the first free slots from the start (the slots before each
    // are all taken, so a probe from its home through the end reaches it).
    let mut front = Vec::with_capacity(past_the_end.len());
    let (mut position, mut at) = (0u64, 0usize);
    for slot in past_the_end {
        while at < placed.len() && placed[at].0 <= position {
            position = position.max(placed[at].0 + 1);
            at += 1;
        }
        front.push((position, slot));
        position += 1;
    }
    let file = create(folder, name, &fresh)?;
    let mut live = vec![0u64; fresh.segments.len()];
    let first = fresh.segments.first().map_or(0, |segment| segment.number);
    let mut buffer = vec![0u8; (CHUNK_WRITTEN * SLOT_BYTES) as usize];
    let mut slots = merge_by_position(front, placed).peekable();
    while let Some(&(position, _)) = slots.peek() {
        let chunk = position / CHUNK_WRITTEN;
        buffer.fill(0);
        while let Some((position, slot)) = slots.next_if(|(position, _)| position / CHUNK_WRITTEN == chunk) {
            let at = ((position % CHUNK_WRITTEN) * SLOT_BYTES) as usize;
            buffer[at..at + SLOT_BYTES as usize].copy_from_slice(&slot.encode());
            live[(slot.segment - first) as usize] += 1;
        }
        write_at(&file, &[&buffer], SLOTS_AT + chunk * CHUNK_WRITTEN * SLOT_BYTES)?;
    }
    for (segment, count) in fresh.segments.iter_mut().zip(live) {
        segment.live = count;
    }
    *state = fresh;
    Ok(file)
}

/// Slots written to a rebuilt index at a time (128 KB).
const CHUNK_WRITTEN: u64 = 4096;

/// Two lists of `(position, slot)`, each in order of position, as one in order.
fn merge_by_position(one: Vec<(u64, Slot)>, other: Vec<(u64, Slot)>) -> impl Iterator<Item = (u64, Slot)> {
    let (mut one, mut other) = (one.into_iter().peekable(), other.into_iter().peekable());
    std::iter::from_fn(move || match (one.peek(), other.peek()) {
        (Some(left), Some(right)) if left.0 <= right.0 => one.next(),
        (Some(_), Some(_)) => other.next(),
        (Some(_), None) => one.next(),
        (None, _) => other.next(),
    })
}
