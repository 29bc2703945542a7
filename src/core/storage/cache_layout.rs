//! The node cache's bytes on disk, and the checks that every byte read from them passes before
//! it is used: the store's state (two copies, each with a CRC-32, the newer whole one used), the
//! index's slots, and the entries' records (each with a CRC-32 of its name and bytes).
//!
//! The folder holds `index` (the state's two copies, then the slots), the segments
//! `log-<number, 16 hex digits>` (records appended, a segment removed whole when the oldest
//! goes), `lock` (the writers' lock) and `boot` (the boot it was written in). Numbers are
//! little-endian.
//!
//! A record: magic `u32`, CRC-32 `u32` (of the name's length `u32`, the value's length `u64`,
//! the name and the value), the name's length `u32`, zero `u32`, the value's length `u64`, the
//! name, the value. A slot (32 bytes): the name's hash (0: empty), the segment's number, the
//! record's offset in it, the record's length.

use crc32fast::Hasher;

/// Bytes of one copy of the state; the index's slots start after the two.
pub const STATE_BYTES: u64 = 4096;
/// Where the first slot is.
pub const SLOTS_AT: u64 = 2 * STATE_BYTES;
/// Bytes of a slot.
pub const SLOT_BYTES: u64 = 32;
/// Segments a store holds at most (the state lists each).
pub const MOST_SEGMENTS: usize = 64;
/// Slots of a new index; a rebuilt one has at least as many.
pub const FEWEST_SLOTS: u64 = 1024;
/// Slots an index may say it has at most (a larger count is a damaged state).
pub const MOST_SLOTS: u64 = 1 << 40;
/// Bytes of a record's header.
pub const RECORD_HEADER: usize = 24;
/// Bytes of a name at most (the Python side keeps a longer name by its digest).
pub const LONGEST_NAME: usize = 1024;
/// Any count or size the state holds is below this (a larger one is a damaged state): sums of
/// up to `MOST_SEGMENTS` of them cannot overflow.
const LARGEST: u64 = 1 << 56;

const STATE_MAGIC: &[u8; 8] = b"STKNODE1";
const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"STKR");
/// Bytes of a copy of the state that its CRC (at 8..12) covers, with the magic: all but itself.
pub const STATE_USED: usize = 16 + 64 + MOST_SEGMENTS * 32;

/// One segment of the store: its number, the bytes appended to it, the bytes it is charged
/// (its records and their slots), and how many of its records are the current entry of their
/// name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    pub number: u64,
    pub bytes: u64,
    pub charged: u64,
    pub live: u64,
}

/// The store's state, as one copy of it holds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// Which copy is newer: the larger, of the two that pass their checks.
    pub sequence: u64,
    /// A number drawn when the store was made (a store emptied and made again has another).
    pub store: u64,
    /// The index's slots (a power of two).
    pub capacity: u64,
    /// Slots not empty (stale ones included: they keep probe chains whole).
    pub used: u64,
    /// The next segment's number.
    pub next_segment: u64,
    /// This index was replaced by a newer one (read `index` again).
    pub superseded: bool,
    /// The segments held, oldest first.
    pub segments: Vec<Segment>,
}

fn word(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]))
}

fn half(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]))
}

fn state_crc(copy: &[u8]) -> u32 {
    let mut hasher = Hasher::new();
    hasher.update(&copy[..8]);
    hasher.update(&copy[12..STATE_USED]);
    hasher.finalize()
}

impl State {
    /// Bytes charged to the entries held, for every process.
    pub fn charged(&self) -> u64 {
        self.segments.iter().map(|segment| segment.charged).sum()
    }

    /// Entries held.
    pub fn live(&self) -> u64 {
        self.segments.iter().map(|segment| segment.live).sum()
    }

    /// The segment numbered `number`, if held.
    pub fn segment(&self, number: u64) -> Option<&Segment> {
        let first = self.segments.first()?.number;
        let at = usize::try_from(number.checked_sub(first)?).ok()?;
        self.segments.get(at).filter(|segment| segment.number == number)
    }

    /// Whether `slot` names an entry of a segment held (else it is empty or stale).
    pub fn holds(&self, slot: &Slot) -> bool {
        slot.hash != 0 && self.segment(slot.segment).is_some()
    }

    /// One copy, `STATE_BYTES` long.
    pub fn encode(&self) -> Vec<u8> {
        let mut copy = vec![0u8; STATE_BYTES as usize];
        copy[..8].copy_from_slice(STATE_MAGIC);
        let numbers = [self.sequence, self.store, self.capacity, self.used, self.next_segment, u64::from(self.superseded)];
        for (index, number) in numbers.iter().enumerate() {
            copy[16 + 8 * index..24 + 8 * index].copy_from_slice(&number.to_le_bytes());
        }
        copy[64..72].copy_from_slice(&(self.segments.len().min(MOST_SEGMENTS) as u64).to_le_bytes());
        for (index, segment) in self.segments.iter().take(MOST_SEGMENTS).enumerate() {
            let at = 80 + 32 * index;
            for (field, number) in [segment.number, segment.bytes, segment.charged, segment.live].iter().enumerate() {
                copy[at + 8 * field..at + 8 * field + 8].copy_from_slice(&number.to_le_bytes());
            }
        }
        let crc = state_crc(&copy);
        copy[8..12].copy_from_slice(&crc.to_le_bytes());
        copy
    }

    /// The state one copy holds, or None when it fails a check (a torn or damaged copy): magic,
    /// CRC, and every number within what a store can hold.
    pub fn decode(copy: &[u8]) -> Option<State> {
        if copy.len() < STATE_USED || &copy[..8] != STATE_MAGIC || half(copy, 8) != state_crc(copy) {
            return None;
        }
        let count = word(copy, 64);
        let state = State {
            sequence: word(copy, 16),
            store: word(copy, 24),
            capacity: word(copy, 32),
            used: word(copy, 40),
            next_segment: word(copy, 48),
            superseded: word(copy, 56) == 1,
            segments: (0..count.min(MOST_SEGMENTS as u64) as usize)
                .map(|index| {
                    let at = 80 + 32 * index;
                    Segment { number: word(copy, at), bytes: word(copy, at + 8), charged: word(copy, at + 16), live: word(copy, at + 24) }
                })
                .collect(),
        };
        let sound = count <= MOST_SEGMENTS as u64
            && state.capacity.is_power_of_two()
            && (FEWEST_SLOTS..=MOST_SLOTS).contains(&state.capacity)
            && state.used <= state.capacity
            && state.next_segment < LARGEST
            && word(copy, 56) <= 1
            && state.segments.windows(2).all(|pair| pair[1].number == pair[0].number + 1)
            && state.segments.last().is_none_or(|last| last.number < state.next_segment)
            && state.segments.iter().all(|segment| segment.bytes < LARGEST && segment.charged < LARGEST && segment.live < LARGEST);
        sound.then_some(state)
    }

    /// The newer of the two copies in `both` (an index's first bytes, at least `STATE_BYTES +
    /// STATE_USED` of them) that pass their checks, or None when neither does.
    pub fn newest(both: &[u8]) -> Option<State> {
        let half = STATE_BYTES as usize;
        let first = both.get(..half).and_then(State::decode);
        let second = both.get(half..).and_then(State::decode);
        match (first, second) {
            (Some(one), Some(other)) => Some(if other.sequence > one.sequence { other } else { one }),
            (one, other) => one.or(other),
        }
    }

    /// Where the copy written with this state's sequence goes: the two alternate, so a torn
    /// write leaves the other whole.
    pub fn copy_offset(&self) -> u64 {
        (self.sequence % 2) * STATE_BYTES
    }
}

/// One slot of the index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub hash: u64,
    pub segment: u64,
    pub offset: u64,
    pub length: u64,
}

impl Slot {
    pub fn encode(&self) -> [u8; SLOT_BYTES as usize] {
        let mut bytes = [0u8; SLOT_BYTES as usize];
        for (index, number) in [self.hash, self.segment, self.offset, self.length].iter().enumerate() {
            bytes[8 * index..8 * index + 8].copy_from_slice(&number.to_le_bytes());
        }
        bytes
    }

    /// The slot in the first 32 bytes of `bytes` (shorter: an empty slot).
    pub fn decode(bytes: &[u8]) -> Slot {
        if bytes.len() < SLOT_BYTES as usize {
            return Slot::default();
        }
        Slot { hash: word(bytes, 0), segment: word(bytes, 8), offset: word(bytes, 16), length: word(bytes, 24) }
    }
}

/// A name's hash in the index: FNV-1a, its bits mixed (murmur3's finalizer) so that the low ones
/// pick a slot well; never 0, which marks an empty slot.
pub fn name_hash(name: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in name {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^= hash >> 33;
    hash.max(1)
}

fn record_crc(name: &[u8], value: &[u8]) -> u32 {
    let mut hasher = Hasher::new();
    hasher.update(&(name.len() as u32).to_le_bytes());
    hasher.update(&(value.len() as u64).to_le_bytes());
    hasher.update(name);
    hasher.update(value);
    hasher.finalize()
}

/// The header of the record of `name` holding `value`.
pub fn record_header(name: &[u8], value: &[u8]) -> [u8; RECORD_HEADER] {
    let mut header = [0u8; RECORD_HEADER];
    header[..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
    header[4..8].copy_from_slice(&record_crc(name, value).to_le_bytes());
    header[8..12].copy_from_slice(&(name.len() as u32).to_le_bytes());
    header[16..24].copy_from_slice(&(value.len() as u64).to_le_bytes());
    header
}

/// What a record read back is.
#[derive(Debug, PartialEq, Eq)]
pub enum Record {
    /// `name`'s, whole: its value can be used.
    Whole,
    /// Another name's record (a name sharing the hash): not this entry, and not damage.
    Other,
    /// Not a record, or `name`'s with bytes that fail their checksum: damaged (or left by a
    /// writer that died mid-store).
    Damaged,
}

/// Check a record read back: `head` its header and name (`RECORD_HEADER + name.len()` bytes),
/// `value` the rest of it.
pub fn check_record(name: &[u8], head: &[u8], value: &[u8]) -> Record {
    if head.len() != RECORD_HEADER + name.len() {
        return Record::Other;
    }
    if half(head, 0) != RECORD_MAGIC {
        return Record::Damaged; // the slot points at no record
    }
    if half(head, 8) as usize != name.len() || &head[RECORD_HEADER..] != name {
        return Record::Other;
    }
    if word(head, 16) == value.len() as u64 && half(head, 4) == record_crc(name, value) {
        Record::Whole
    } else {
        Record::Damaged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            sequence: 7,
            store: 99,
            capacity: 2048,
            used: 3,
            next_segment: 12,
            superseded: false,
            segments: vec![
                Segment { number: 10, bytes: 500, charged: 600, live: 2 },
                Segment { number: 11, bytes: 40, charged: 80, live: 1 },
            ],
        }
    }

    #[test]
    fn a_state_reads_back_and_any_flipped_bit_is_caught() {
        let copy = state().encode();
        assert_eq!(State::decode(&copy), Some(state()));
        for bit in (0..STATE_USED * 8).step_by(7) {
            let mut damaged = copy.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(State::decode(&damaged), None, "bit {bit}");
        }
    }

    #[test]
    fn the_newer_whole_copy_wins() {
        let mut newer = state();
        newer.sequence = 8;
        let mut both = [state().encode(), newer.encode()].concat();
        assert_eq!(State::newest(&both).map(|state| state.sequence), Some(8));
        both[STATE_BYTES as usize + 20] ^= 1; // the newer one torn: the older is used
        assert_eq!(State::newest(&both).map(|state| state.sequence), Some(7));
        both[20] ^= 1;
        assert_eq!(State::newest(&both), None);
    }

    #[test]
    fn a_record_is_checked_by_name_and_bytes() {
        let header = record_header(b"name", b"value");
        let head = [header.as_slice(), b"name"].concat();
        assert_eq!(check_record(b"name", &head, b"value"), Record::Whole);
        assert_eq!(check_record(b"name", &head, b"valuX"), Record::Damaged);
        assert_eq!(check_record(b"nome", &[header.as_slice(), b"nome"].concat(), b"value"), Record::Damaged);
        assert_eq!(check_record(b"other", &head, b"value"), Record::Other);
    }

    #[test]
    fn a_segment_is_found_by_number_and_a_stale_slot_is_not_held() {
        let state = state();
        assert_eq!(state.segment(11).map(|segment| segment.bytes), Some(40));
        assert!(state.segment(9).is_none() && state.segment(12).is_none());
        assert!(state.holds(&Slot { hash: 5, segment: 10, offset: 0, length: 30 }));
        assert!(!state.holds(&Slot { hash: 5, segment: 9, offset: 0, length: 30 }));
        assert!(!state.holds(&Slot { hash: 0, segment: 10, offset: 0, length: 30 }));
        assert_ne!(name_hash(b""), 0);
    }
}
