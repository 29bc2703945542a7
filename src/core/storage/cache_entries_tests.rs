//! Tests of the node cache's store (`cache_entries`, `cache_writes`): eviction, a name stored
//! again, a rebuilt index, any bytes in its files, another boot, a link never followed.

use super::*;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

fn folder(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("stoker-cache-entries-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&path);
    std::fs::create_dir_all(&path).unwrap();
    path
}

fn open(path: &PathBuf, boot: Option<&str>) -> CacheEntries {
    let handle = File::open(path).unwrap();
    CacheEntries::open(handle.as_raw_fd(), Settings { sync: false, boot: boot.map(str::to_owned) }).unwrap()
}

fn read(cache: &CacheEntries, names: &[&[u8]]) -> Vec<Option<Vec<u8>>> {
    let mut found = Vec::new();
    cache.get_many(names, |value| found.push(value.map(<[u8]>::to_vec))).unwrap();
    found
}

#[test]
fn the_oldest_entries_go_first_and_the_limit_holds() {
    let path = folder("oldest");
    let cache = open(&path, None);
    for number in 0..40u32 {
        let name = format!("s{number}");
        assert_eq!(cache.put_many(&[(name.as_bytes(), vec![number as u8; 10_000])], 100 * 1024).unwrap(), 1);
        assert!(cache.size().unwrap() <= 100 * 1024);
    }
    let kept = read(&cache, &[b"s0", b"s39"]);
    assert_eq!(kept[0], None, "the oldest went first");
    assert_eq!(kept[1], Some(vec![39u8; 10_000]));
    assert!(cache.len().unwrap() < 40 && cache.len().unwrap() >= 8);
    let _ = std::fs::remove_dir_all(path);
}

#[test]
fn storing_a_name_again_replaces_its_entry() {
    let path = folder("again");
    let cache = open(&path, None);
    cache.put_many(&[(b"a".as_slice(), vec![1u8; 5000])], 1 << 20).unwrap();
    cache.put_many(&[(b"a".as_slice(), vec![2u8; 5000])], 1 << 20).unwrap();
    assert_eq!(cache.len().unwrap(), 1);
    assert_eq!(read(&cache, &[b"a"])[0], Some(vec![2u8; 5000]));
    let _ = std::fs::remove_dir_all(path);
}

#[test]
fn an_entry_larger_than_the_limit_is_not_kept() {
    let path = folder("larger");
    let cache = open(&path, None);
    assert_eq!(cache.put_many(&[(b"big".as_slice(), vec![0u8; 70 * 1024])], 64 * 1024).unwrap(), 0);
    assert!(cache.is_empty().unwrap());
    let _ = std::fs::remove_dir_all(path);
}

#[test]
fn a_rebuilt_index_keeps_every_entry_for_a_handle_opened_before_it() {
    let path = folder("rebuild");
    let writer = open(&path, None);
    let reader = open(&path, None);
    let names: Vec<String> = (0..3000).map(|number| format!("sample-{number}")).collect();
    for chunk in names.chunks(100) {
        let items: Vec<(&[u8], Vec<u8>)> = chunk.iter().map(|name| (name.as_bytes(), name.as_bytes().repeat(3))).collect();
        assert_eq!(writer.put_many(&items, 1 << 30).unwrap(), 100);
    }
    let keys: Vec<&[u8]> = names.iter().map(|name| name.as_bytes()).collect();
    let found = read(&reader, &keys);
    assert!(found.iter().zip(&names).all(|(value, name)| value.as_deref() == Some(name.as_bytes().repeat(3).as_slice())));
    assert_eq!(reader.len().unwrap(), 3000);
    let _ = std::fs::remove_dir_all(path);
}

#[test]
fn any_bytes_in_any_file_read_as_misses_or_a_store_made_anew() {
    let path = folder("bytes");
    let cache = open(&path, None);
    cache.put_many(&[(b"a".as_slice(), vec![7u8; 3000]), (b"b".as_slice(), vec![8u8; 3000])], 1 << 20).unwrap();
    drop(cache);
    let mut noise = 0x9e37_79b9_7f4a_7c15u64;
    let mut bytes = |count: usize| -> Vec<u8> {
        (0..count)
            .map(|_| {
                noise ^= noise << 13;
                noise ^= noise >> 7;
                noise ^= noise << 17;
                noise as u8
            })
            .collect()
    };
    std::fs::write(path.join("log-0000000000000000"), bytes(5000)).unwrap();
    let cache = open(&path, None);
    assert_eq!(read(&cache, &[b"a", b"b"]), vec![None, None], "a damaged segment: misses");
    std::fs::write(path.join("index"), bytes(40_000)).unwrap();
    let cache = open(&path, None);
    assert!(cache.notices().iter().any(|(_, notice)| notice.contains("damaged")));
    assert_eq!(read(&cache, &[b"a"]), vec![None]);
    cache.put_many(&[(b"c".as_slice(), vec![9u8; 100])], 1 << 20).unwrap();
    assert_eq!(read(&cache, &[b"c"]), vec![Some(vec![9u8; 100])], "made anew, it works");
    let _ = std::fs::remove_dir_all(path);
}

#[test]
fn a_store_of_another_boot_is_emptied_and_a_link_is_never_followed() {
    let path = folder("boot");
    let outside = folder("outside");
    std::fs::write(outside.join("precious"), b"keep").unwrap();
    let cache = open(&path, Some("boot-a"));
    cache.put_many(&[(b"a".as_slice(), vec![1u8; 100])], 1 << 20).unwrap();
    drop(cache);
    std::fs::remove_file(path.join("lock")).unwrap();
    std::os::unix::fs::symlink(outside.join("precious"), path.join("lock")).unwrap();
    std::os::unix::fs::symlink(outside.join("precious"), path.join("log-00000000000000ff")).unwrap();
    let cache = open(&path, Some("boot-b"));
    assert!(cache.notices().iter().any(|(_, notice)| notice.contains("before this machine last started")));
    assert_eq!(read(&cache, &[b"a"]), vec![None]);
    assert_eq!(std::fs::read(outside.join("precious")).unwrap(), b"keep", "a link's target is never touched");
    let _ = std::fs::remove_dir_all(path);
    let _ = std::fs::remove_dir_all(outside);
}
