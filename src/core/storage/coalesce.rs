//! Plan few large reads for many small requests: sort by offset, merge neighbours whose gap is
//! small, cap each merged read's size. Reading 40 KB of gap is cheaper than a second request on
//! every device we care about (a disk seek, an NVMe command, an HTTP range request).

/// One requested byte range, and where its bytes go in the caller's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub offset: u64,
    pub length: u64,
}

/// One read to perform, and the requests it serves: (request index, offset inside this read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub offset: u64,
    pub length: u64,
    pub serves: Vec<(usize, u64)>,
}

/// Group `requests` into reads. Requests may overlap, repeat, touch or come in any order.
///
/// `max_gap`: the largest hole between two requests still read through.
/// `max_read`: no merged read grows past this many bytes (a single larger request is read alone).
pub fn plan(requests: &[Request], max_gap: u64, max_read: u64) -> Vec<Read> {
    let mut order: Vec<usize> = (0..requests.len()).collect();
    order.sort_by_key(|&index| (requests[index].offset, requests[index].length));
    let mut reads: Vec<Read> = Vec::new();
    for index in order {
        let request = requests[index];
        let end = request.offset + request.length;
        if let Some(current) = reads.last_mut() {
            let current_end = current.offset + current.length;
            let merged_length = end.max(current_end) - current.offset;
            if request.offset <= current_end.saturating_add(max_gap) && merged_length <= max_read.max(current.length) {
                current.length = merged_length;
                current.serves.push((index, request.offset - current.offset));
                continue;
            }
        }
        reads.push(Read { offset: request.offset, length: request.length, serves: vec![(index, 0)] });
    }
    reads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(offset: u64, length: u64) -> Request {
        Request { offset, length }
    }

    #[test]
    fn adjacent_and_nearby_requests_merge() {
        let reads = plan(&[request(0, 10), request(10, 10), request(25, 5)], 8, 1 << 20);
        assert_eq!(reads.len(), 1);
        assert_eq!((reads[0].offset, reads[0].length), (0, 30));
        assert_eq!(reads[0].serves, vec![(0, 0), (1, 10), (2, 25)]);
    }

    #[test]
    fn far_requests_stay_apart_and_order_is_by_offset() {
        let reads = plan(&[request(1000, 10), request(0, 10)], 8, 1 << 20);
        assert_eq!(reads.len(), 2);
        assert_eq!(reads[0].serves, vec![(1, 0)]);
        assert_eq!(reads[1].serves, vec![(0, 0)]);
    }

    #[test]
    fn overlapping_and_repeated_requests_share_a_read() {
        let reads = plan(&[request(5, 10), request(0, 20), request(5, 10)], 0, 1 << 20);
        assert_eq!(reads.len(), 1);
        assert_eq!((reads[0].offset, reads[0].length), (0, 20));
        let mut serves = reads[0].serves.clone();
        serves.sort();
        assert_eq!(serves, vec![(0, 5), (1, 0), (2, 5)]);
    }

    #[test]
    fn max_read_caps_merging() {
        let reads = plan(&[request(0, 60), request(60, 60), request(120, 60)], 0, 100);
        assert_eq!(reads.len(), 3);
        // A single request larger than the cap is still read, alone.
        assert_eq!(plan(&[request(0, 500)], 0, 100)[0].length, 500);
    }
}
