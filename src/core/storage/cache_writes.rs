//! The node cache's stores (`CacheEntries::put_many`): records appended to the newest segment, the
//! oldest segments removed to stay within the limit, a slot of the index written for each entry,
//! the index rebuilt before it is half full, and the state written last, all under the node's
//! writer lock (an `flock` on the store's `lock` file, and a mutex for this process's threads).
//! A writer killed anywhere in a store leaves records past the state's end (overwritten by the
//! next store) or slots whose records fail their checks (misses): never a wrong entry.

use std::fs::File;
use std::sync::Arc;

use super::cache_entries::{lock, read_state, segment_name, CacheEntries, CacheError, Writing};
use super::cache_files::{write_at, Locked};
use super::cache_index;
use super::cache_layout::{name_hash, record_header, Segment, Slot, State, LONGEST_NAME, MOST_SEGMENTS, RECORD_HEADER, SLOT_BYTES};

/// A segment takes records up to this share of the limit before the next one starts.
const SEGMENTS_A_LIMIT: u64 = 32;
/// Bytes an entry is charged besides its record: its slot in an index at most half full.
const SLOT_CHARGE: u64 = 2 * SLOT_BYTES;

impl CacheEntries {
    /// Bytes an entry is charged: its record and its slot.
    pub fn cost(name: &[u8], length: u64) -> u64 {
        (RECORD_HEADER + name.len()) as u64 + length + SLOT_CHARGE
    }

    /// Keep each `(name, data)` in one store under the writers' lock, removing the oldest
    /// segments to stay within `max_bytes`; an entry larger than the whole limit is not kept.
    /// Returns how many were.
    pub fn put_many<K: AsRef<[u8]>, D: AsRef<[u8]>>(&self, items: &[(K, D)], max_bytes: u64) -> Result<usize, CacheError> {
        let kept: Vec<(&[u8], &[u8])> = items
            .iter()
            .map(|(name, data)| (name.as_ref(), data.as_ref()))
            .filter(|(name, data)| name.len() <= LONGEST_NAME && Self::cost(name, data.len() as u64) <= max_bytes)
            .collect();
        if kept.is_empty() {
            return Ok(0);
        }
        let mut writer = lock(&self.writer);
        let _locked = Locked::exclusive(&self.lock)?;
        let (mut index, mut state) = self.current_for_writing()?;
        let target = (max_bytes / SEGMENTS_A_LIMIT).max(1);
        let mut touched: Vec<Arc<File>> = Vec::new(); // segment files written, flushed when `sync`
        for &(name, data) in &kept {
            let length = (RECORD_HEADER + name.len() + data.len()) as u64;
            let charge = length + SLOT_CHARGE;
            while !state.segments.is_empty() && state.charged() + charge > max_bytes {
                self.remove_oldest(&mut state, &mut writer)?;
            }
            let mut file = match state.segments.last() {
                Some(last) if last.charged < target => self.writing(&state, &mut writer),
                _ => None,
            };
            if file.is_none() {
                if state.segments.len() >= MOST_SEGMENTS {
                    self.remove_oldest(&mut state, &mut writer)?;
                }
                file = Some(self.start_segment(&mut state, &mut writer)?);
            }
            let file = file.ok_or_else(|| CacheError("no segment to write".into()))?;
            if !touched.iter().any(|seen| Arc::ptr_eq(seen, &file)) {
                touched.push(file.clone());
            }
            let segment = state.segments.last_mut().ok_or_else(|| CacheError("no segment to write".into()))?;
            let offset = segment.bytes;
            write_at(&file, &[&record_header(name, data), name, data], offset)?;
            segment.bytes += length;
            segment.charged += charge;
            let hash = name_hash(name);
            let number = segment.number;
            // A quarter to a half full: rebuilt before it passes half (mid-store too: a store of
            // a thousand entries into a new index of 1,024 slots would fill it).
            if (state.used + 1) * 2 > state.capacity {
                index = self.rebuild(&index, &mut state)?;
            }
            let mut place = cache_index::place(&index, &state, hash)?;
            if place.is_none() {
                // No free slot within a probe's reach (slots of a damaged index): rebuilt, once.
                index = self.rebuild(&index, &mut state)?;
                place = cache_index::place(&index, &state, hash)?;
            }
            let Some(place) = place else {
                continue; // stored, but reachable by no slot: a miss
            };
            if let Some(old) = place.replaced {
                if let Some(at) = state.segments.iter_mut().find(|segment| segment.number == old.segment) {
                    at.live = at.live.saturating_sub(1);
                }
            }
            state.used += u64::from(place.was_empty);
            cache_index::write_slot(&index, place.position, &Slot { hash, segment: number, offset, length })?;
            if let Some(last) = state.segments.last_mut() {
                last.live += 1; // counted once its slot is written (a rebuild above counts the slots it finds)
            }
        }
        self.commit(&index, &mut state, &touched)?;
        Ok(kept.len())
    }

    /// The current index and its state under the writers' lock (opened again when replaced;
    /// made anew when its state fails its checks).
    fn current_for_writing(&self) -> Result<(Arc<File>, State), CacheError> {
        for _ in 0..4 {
            let index = self.index.read().map_err(|_| CacheError("a thread panicked holding the index".into()))?.clone();
            match read_state(&index, true)? {
                Some(state) if !state.superseded => return Ok((index, state)),
                Some(_) => self.reopen_index()?,
                None => {
                    let fresh = Arc::new(Self::make_anew(&self.folder, &self.settings)?);
                    *self.index.write().map_err(|_| CacheError("a thread panicked holding the index".into()))? = fresh;
                    self.notice("its index failed its checks (damaged) while in use: emptied and made again".into());
                }
            }
        }
        Err(CacheError("its index kept changing while being written".into()))
    }

    fn remove_oldest(&self, state: &mut State, writer: &mut Writing) -> Result<(), CacheError> {
        let oldest = state.segments.remove(0);
        if writer.as_ref().is_some_and(|(store, number, _)| *store == state.store && *number == oldest.number) {
            *writer = None;
        }
        self.folder.remove(&segment_name(oldest.number))?;
        Ok(())
    }

    fn start_segment(&self, state: &mut State, writer: &mut Writing) -> Result<Arc<File>, CacheError> {
        let number = state.next_segment;
        let file = Arc::new(self.folder.create_new(&segment_name(number))?); // a file a writer that died made first is replaced
        state.segments.push(Segment { number, ..Segment::default() });
        state.next_segment += 1;
        *writer = Some((state.store, number, file.clone()));
        Ok(file)
    }

    /// The newest segment, open for writing; None when it cannot be opened (gone, or not a
    /// regular file: the next one is started).
    fn writing(&self, state: &State, writer: &mut Writing) -> Option<Arc<File>> {
        let last = state.segments.last()?;
        if let Some((store, number, file)) = writer.as_ref() {
            if *store == state.store && *number == last.number {
                return Some(file.clone());
            }
        }
        let file = Arc::new(self.folder.open(&segment_name(last.number), true, false).ok()?);
        *writer = Some((state.store, last.number, file.clone()));
        Some(file)
    }

    fn rebuild(&self, index: &Arc<File>, state: &mut State) -> Result<Arc<File>, CacheError> {
        let mut rebuilt = state.clone();
        let fresh = cache_index::rebuild(&self.folder, "index.new", index, &mut rebuilt)?;
        rebuilt.sequence = state.sequence + 1;
        write_at(&fresh, &[&rebuilt.encode()], rebuilt.copy_offset())?;
        if self.settings.sync {
            fresh.sync_data()?;
        }
        self.folder.rename("index.new", "index")?;
        // The old index says it was replaced: readers holding it open the new one.
        state.sequence += 1;
        state.superseded = true;
        write_at(index, &[&state.encode()], state.copy_offset())?;
        *state = rebuilt;
        let fresh = Arc::new(fresh);
        *self.index.write().map_err(|_| CacheError("a thread panicked holding the index".into()))? = fresh.clone();
        Ok(fresh)
    }

    /// Write `state` (its sequence one more) into `index`'s older copy; flushed when `sync`.
    fn commit(&self, index: &File, state: &mut State, touched: &[Arc<File>]) -> Result<(), CacheError> {
        if self.settings.sync {
            for file in touched {
                file.sync_data()?;
            }
            index.sync_data()?;
        }
        state.sequence += 1;
        write_at(index, &[&state.encode()], state.copy_offset())?;
        if self.settings.sync {
            index.sync_data()?;
        }
        Ok(())
    }
}
