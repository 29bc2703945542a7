//! The packer: documents in, full rows out, by streaming greedy or best-fit-decreasing within a
//! window. It holds only what is not yet in a finished row, and can describe that state as
//! (document, start, length) pieces so a loader can resume exactly after a restart.

use std::collections::VecDeque;

use super::row::{Row, Segment};

/// What to do with a document longer than the context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongDocuments {
    /// Cut into context-sized pieces, each placed like a document.
    Split,
    /// Keep the first `context` tokens.
    Truncate,
    /// Leave it out.
    Drop,
}

/// How rows are filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Next document into the current row if it fits, else close the row.
    Greedy,
    /// Collect `window` documents, place the longest first into the row it fits most tightly.
    BestFit { window: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub context: usize,
    pub strategy: Strategy,
    pub long_documents: LongDocuments,
    /// Fill the rest of a row with the start of a document that does not fit, continuing it in
    /// the next row (100% fill; documents cross rows). Otherwise documents stay whole.
    pub split_across_rows: bool,
}

/// Tokens accounted for, for the efficiency report and the no-loss checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub documents: u64,
    pub empty_documents: u64,
    pub tokens_in: u64,
    pub tokens_dropped: u64,
    pub rows: u64,
    pub tokens_packed: u64,
}

/// A document, or the part of one not yet placed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    document: u64,
    start: u32,
    tokens: Vec<u32>,
}

#[derive(Debug, Clone)]
pub struct Packer {
    config: Config,
    pending: VecDeque<Pending>,
    open: Vec<Row>,
    ready: VecDeque<Row>,
    pub counters: Counters,
}

/// Open rows kept between best-fit windows at most; the fullest beyond that are closed.
const MAX_OPEN_ROWS: usize = 8;

impl Packer {
    pub fn new(config: Config) -> Self {
        assert!(config.context > 0, "context must be positive");
        Packer { config, pending: VecDeque::new(), open: Vec::new(), ready: VecDeque::new(), counters: Counters::default() }
    }

    pub fn config(&self) -> Config {
        self.config
    }

    /// Add one document (its id is the caller's, e.g. its position in the epoch's order).
    pub fn push(&mut self, document: u64, tokens: &[u32]) {
        self.counters.documents += 1;
        self.counters.tokens_in += tokens.len() as u64;
        if tokens.is_empty() {
            self.counters.empty_documents += 1;
            return;
        }
        let context = self.config.context;
        if tokens.len() > context {
            match self.config.long_documents {
                LongDocuments::Drop => {
                    self.counters.tokens_dropped += tokens.len() as u64;
                    return;
                }
                LongDocuments::Truncate => {
                    self.counters.tokens_dropped += (tokens.len() - context) as u64;
                    self.place(Pending { document, start: 0, tokens: tokens[..context].to_vec() });
                    return;
                }
                LongDocuments::Split => {
                    for (index, piece) in tokens.chunks(context).enumerate() {
                        self.place(Pending { document, start: (index * context) as u32, tokens: piece.to_vec() });
                    }
                    return;
                }
            }
        }
        self.place(Pending { document, start: 0, tokens: tokens.to_vec() });
    }

    fn place(&mut self, piece: Pending) {
        match self.config.strategy {
            Strategy::Greedy => self.place_greedy(piece),
            Strategy::BestFit { window } => {
                self.pending.push_back(piece);
                if self.pending.len() >= window.max(1) {
                    self.place_window();
                }
            }
        }
    }

    fn close(&mut self, row: Row) {
        self.counters.rows += 1;
        self.counters.tokens_packed += row.fill() as u64;
        self.ready.push_back(row);
    }

    fn place_greedy(&mut self, mut piece: Pending) {
        let context = self.config.context;
        loop {
            if self.open.is_empty() {
                self.open.push(Row::default());
            }
            let room = context - self.open[0].fill();
            if piece.tokens.len() <= room {
                self.open[0].push(piece.document, piece.start, &piece.tokens);
                if self.open[0].fill() == context {
                    let row = self.open.pop().expect("open row");
                    self.close(row);
                }
                return;
            }
            if self.config.split_across_rows && room > 0 {
                self.open[0].push(piece.document, piece.start, &piece.tokens[..room]);
                piece.start += room as u32;
                piece.tokens.drain(..room);
            }
            let row = self.open.pop().expect("open row");
            self.close(row);
        }
    }

    /// Best fit decreasing over the pending window, carrying the emptiest rows to the next one.
    fn place_window(&mut self) {
        let context = self.config.context;
        let mut pieces: Vec<Pending> = self.pending.drain(..).collect();
        // Longest first; ties by document id so the result does not depend on arrival order.
        pieces.sort_by(|a, b| b.tokens.len().cmp(&a.tokens.len()).then(a.document.cmp(&b.document)).then(a.start.cmp(&b.start)));
        let smallest = pieces.last().map_or(1, |piece| piece.tokens.len());
        for piece in pieces {
            let length = piece.tokens.len();
            let best = self
                .open
                .iter()
                .enumerate()
                .filter(|(_, row)| context - row.fill() >= length)
                .min_by_key(|(_, row)| context - row.fill())
                .map(|(index, _)| index);
            match best {
                Some(index) => self.open[index].push(piece.document, piece.start, &piece.tokens),
                None => {
                    let mut row = Row::default();
                    row.push(piece.document, piece.start, &piece.tokens);
                    self.open.push(row);
                }
            }
        }
        // Rows that cannot take even the window's smallest piece are done; of the rest, keep the
        // emptiest few open for the next window.
        let mut keep = Vec::new();
        for row in std::mem::take(&mut self.open) {
            if context - row.fill() < smallest {
                self.close(row);
            } else {
                keep.push(row);
            }
        }
        keep.sort_by_key(|row| std::cmp::Reverse(context - row.fill()));
        while keep.len() > MAX_OPEN_ROWS {
            let row = keep.pop().expect("a row");
            self.close(row);
        }
        self.open = keep;
    }

    /// No more documents: place what is pending and close every row.
    pub fn finish(&mut self) {
        if !self.pending.is_empty() {
            self.place_window();
        }
        let mut rows = std::mem::take(&mut self.open);
        rows.sort_by_key(|row| row.segments.first().map(|segment| (segment.document, segment.start)));
        for row in rows {
            if row.fill() > 0 {
                self.close(row);
            }
        }
    }

    pub fn ready_rows(&self) -> usize {
        self.ready.len()
    }

    /// Take up to `count` finished rows, oldest first.
    pub fn take_rows(&mut self, count: usize) -> Vec<Row> {
        let count = count.min(self.ready.len());
        self.ready.drain(..count).collect()
    }

    /// Everything not yet handed out, as pieces: (ready rows, open rows, pending pieces). A
    /// packer rebuilt by `restore` from these (with the same documents' tokens) continues
    /// exactly where this one is.
    pub fn state(&self) -> (Vec<Vec<Segment>>, Vec<Vec<Segment>>, Vec<Segment>) {
        let rows = |rows: &mut dyn Iterator<Item = &Row>| rows.map(|row| row.segments.clone()).collect::<Vec<_>>();
        let pending = self
            .pending
            .iter()
            .map(|piece| Segment { document: piece.document, start: piece.start, length: piece.tokens.len() as u32 })
            .collect();
        (rows(&mut self.ready.iter()), rows(&mut self.open.iter()), pending)
    }

    /// Rebuild the state described by `state()`; `tokens(document, start, length)` returns the
    /// tokens of a piece.
    pub fn restore(
        &mut self,
        ready: &[Vec<Segment>],
        open: &[Vec<Segment>],
        pending: &[Segment],
        counters: Counters,
        mut tokens: impl FnMut(u64, u32, u32) -> Result<Vec<u32>, String>,
    ) -> Result<(), String> {
        let mut build = |segments: &Vec<Segment>| -> Result<Row, String> {
            let mut row = Row::default();
            for segment in segments {
                row.push(segment.document, segment.start, &tokens(segment.document, segment.start, segment.length)?);
            }
            if row.fill() > self.config.context {
                return Err(format!("a saved row holds {} tokens, more than the context {}", row.fill(), self.config.context));
            }
            Ok(row)
        };
        self.ready = ready.iter().map(&mut build).collect::<Result<_, _>>()?;
        self.open = open.iter().map(&mut build).collect::<Result<_, _>>()?;
        self.pending = pending
            .iter()
            .map(|segment| {
                Ok(Pending {
                    document: segment.document,
                    start: segment.start,
                    tokens: tokens(segment.document, segment.start, segment.length)?,
                })
            })
            .collect::<Result<_, String>>()?;
        self.counters = counters;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(strategy: Strategy, long_documents: LongDocuments, split_across_rows: bool) -> Config {
        Config { context: 10, strategy, long_documents, split_across_rows }
    }

    fn document(id: u64, length: usize) -> Vec<u32> {
        (0..length as u32).map(|index| id as u32 * 1000 + index).collect()
    }

    /// Every input token appears exactly once across all rows, in document order within pieces.
    fn all_tokens(rows: &[Row]) -> Vec<u32> {
        let mut tokens: Vec<u32> = rows.iter().flat_map(|row| row.tokens.iter().copied()).collect();
        tokens.sort();
        tokens
    }

    fn run(config: Config, lengths: &[usize]) -> (Vec<Row>, Counters) {
        let mut packer = Packer::new(config);
        for (id, &length) in lengths.iter().enumerate() {
            packer.push(id as u64, &document(id as u64, length));
        }
        packer.finish();
        let rows = packer.take_rows(usize::MAX);
        (rows, packer.counters)
    }

    #[test]
    fn greedy_keeps_documents_whole() {
        let (rows, counters) = run(config(Strategy::Greedy, LongDocuments::Split, false), &[4, 4, 4, 6, 10, 1]);
        let fills: Vec<usize> = rows.iter().map(Row::fill).collect();
        assert_eq!(fills, vec![8, 10, 10, 1]);
        assert_eq!(counters.tokens_packed, 29);
        let mut expected: Vec<u32> = [4, 4, 4, 6, 10, 1].iter().enumerate().flat_map(|(id, &n)| document(id as u64, n)).collect();
        expected.sort();
        assert_eq!(all_tokens(&rows), expected);
    }

    #[test]
    fn split_across_rows_fills_every_row() {
        let (rows, _) = run(config(Strategy::Greedy, LongDocuments::Split, true), &[4, 4, 4, 6, 10, 1]);
        let fills: Vec<usize> = rows.iter().map(Row::fill).collect();
        assert_eq!(fills, vec![10, 10, 9]);
        assert_eq!(rows[1].segments[0], Segment { document: 2, start: 2, length: 2 });
    }

    #[test]
    fn long_document_policies() {
        let (rows, counters) = run(config(Strategy::Greedy, LongDocuments::Split, false), &[25]);
        assert_eq!(rows.iter().map(Row::fill).collect::<Vec<_>>(), vec![10, 10, 5]);
        assert_eq!(rows[2].segments[0].start, 20);
        assert_eq!(counters.tokens_dropped, 0);
        let (rows, counters) = run(config(Strategy::Greedy, LongDocuments::Truncate, false), &[25, 3]);
        assert_eq!(rows.iter().map(Row::fill).collect::<Vec<_>>(), vec![10, 3]);
        assert_eq!(counters.tokens_dropped, 15);
        let (rows, counters) = run(config(Strategy::Greedy, LongDocuments::Drop, false), &[25, 3, 0]);
        assert_eq!(rows.iter().map(Row::fill).collect::<Vec<_>>(), vec![3]);
        assert_eq!((counters.tokens_dropped, counters.empty_documents), (25, 1));
    }

    #[test]
    fn best_fit_packs_tighter_than_greedy() {
        let lengths = [6, 6, 6, 4, 4, 4, 3, 3, 2, 2];
        let (greedy, _) = run(config(Strategy::Greedy, LongDocuments::Split, false), &lengths);
        let (best, counters) = run(config(Strategy::BestFit { window: 10 }, LongDocuments::Split, false), &lengths);
        assert!(best.len() < greedy.len(), "{} vs {}", best.len(), greedy.len());
        assert_eq!(counters.tokens_packed, 40);
        assert_eq!(best.len(), 4);
    }

    #[test]
    fn state_and_restore_continue_exactly() {
        let lengths: Vec<usize> = (0..200).map(|index| 1 + (index * 7919) % 9).collect();
        for strategy in [Strategy::Greedy, Strategy::BestFit { window: 16 }] {
            let config = config(strategy, LongDocuments::Split, false);
            let (expected, _) = run(config, &lengths);
            let mut first = Packer::new(config);
            let mut rows = Vec::new();
            for (id, &length) in lengths.iter().enumerate().take(77) {
                first.push(id as u64, &document(id as u64, length));
            }
            rows.extend(first.take_rows(3));
            let (ready, open, pending) = first.state();
            let mut second = Packer::new(config);
            second
                .restore(&ready, &open, &pending, first.counters, |id, start, length| {
                    Ok(document(id, lengths[id as usize])[start as usize..(start + length) as usize].to_vec())
                })
                .unwrap();
            for (id, &length) in lengths.iter().enumerate().skip(77) {
                second.push(id as u64, &document(id as u64, length));
            }
            second.finish();
            rows.extend(second.take_rows(usize::MAX));
            assert_eq!(rows, expected);
        }
    }
}
