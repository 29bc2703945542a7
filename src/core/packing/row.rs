//! One row of a packed batch: tokens of whole documents (or pieces of long ones) back to back,
//! padding only after the last.

/// A piece of a document placed in a row: which document, from which token, how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub document: u64,
    pub start: u32,
    pub length: u32,
}

/// A row being filled or ready: its tokens and the segments they came from, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    pub tokens: Vec<u32>,
    pub segments: Vec<Segment>,
}

impl Row {
    pub fn fill(&self) -> usize {
        self.tokens.len()
    }

    pub fn push(&mut self, document: u64, start: u32, tokens: &[u32]) {
        self.segments.push(Segment { document, start, length: tokens.len() as u32 });
        self.tokens.extend_from_slice(tokens);
    }
}

/// The arrays of one batch, row-major `rows x context`, written by `write_rows`.
pub struct BatchArrays<'a> {
    pub input_ids: &'a mut [i64],
    pub position_ids: &'a mut [i32],
    pub segment_ids: &'a mut [i32],
    pub loss_mask: &'a mut [u8],
}

/// Write `rows` into the batch arrays (which the caller zeroed or reuses: every position is
/// written). Returns `cu_seqlens` over the flattened batch: one segment per document piece, and
/// one per row's padding tail, so the last entry is rows x context.
pub fn write_rows(rows: &[Row], context: usize, pad_id: i64, out: BatchArrays<'_>) -> Vec<i32> {
    let mut cu_seqlens = vec![0i32];
    let mut total = 0i32;
    let chunks = out
        .input_ids
        .chunks_exact_mut(context)
        .zip(out.position_ids.chunks_exact_mut(context))
        .zip(out.segment_ids.chunks_exact_mut(context))
        .zip(out.loss_mask.chunks_exact_mut(context));
    for (row, (((ids, positions), segments), mask)) in rows.iter().zip(chunks) {
        let mut at = 0usize;
        for (number, segment) in row.segments.iter().enumerate() {
            let length = segment.length as usize;
            for offset in 0..length {
                ids[at + offset] = row.tokens[at + offset] as i64;
                positions[at + offset] = offset as i32;
                segments[at + offset] = number as i32 + 1;
            }
            mask[at..at + length].fill(1);
            at += length;
            total += length as i32;
            cu_seqlens.push(total);
        }
        if at < context {
            ids[at..].fill(pad_id);
            positions[at..].fill(0);
            segments[at..].fill(0);
            mask[at..].fill(0);
            total += (context - at) as i32;
            cu_seqlens.push(total);
        }
    }
    cu_seqlens
}
