//! Which photos of an import are one product: the grouping rules (`[import] group_by`), the
//! barcode merge, and the size cap (`[import] max_photos_per_product`). Pure: paths and GTINs in,
//! groups of indices out; nothing here touches the disk or fails.
//!
//! ## The stem rule (`group_by = "stem"`, the default)
//!
//! Photos in the same folder whose names share a stem are one product. The stem is the file name
//! without its extension and without **one** trailing part, which is either
//! - a separator (`_`, `-` or a space) followed by a photo number or a side word (front, back,
//!   side, left, right, top, bottom, label, detail; any case): `sku123_1`, `sku123-2`,
//!   `SKU123 back`, `sku123_FRONT`;
//! - or a copy suffix ` (N)`: `sku123 (3)`.
//!
//! So `sku123.jpg`, `sku123_1.jpg`, `sku123-2.jpg`, `SKU123 back.jpg` and `sku123 (3).jpg` are one
//! product. Stems compare without regard to case; the extension does not count (`.JPG`, `.jpeg`).
//! Only one part goes: `a_b_2.jpg` has the stem `a_b` (with `a_b.jpg`, not with `a.jpg`), and
//! `sku123_back_2.jpg` the stem `sku123_back`.
//!
//! A third form comes from marketplace image exports (Amazon's): a dot, then `MAIN`, `PT01` to
//! `PT99` or `SWCH`/`SWATCH` (any case): `B00SKU.MAIN.jpg`, `B00SKU.PT01.jpg`. Other dots are part
//! of the name (`sku.v2.jpg` is its own stem).
//!
//! Choices made so that a camera's or a renamed shoot's numbers are not lumped together, decided
//! from how files are really named (the table in the tests: shop exports `SKU_1`, `SKU-front`,
//! `SKU.PT01`, `SKU_01`; cameras `IMG_0001`, `DSC01234`, `PXL_20240105_123456789`; batch renames
//! `Shoot_001`, `photo-000`):
//! - **A photo number has at most 2 digits.** Shops number a product's photos 1 to a dozen
//!   (`_1`, `-2`, `_01`); three digits or more (`IMG_0001`, `DSC_1234`, `Shoot_001`, `photo-059`)
//!   are counters of a whole shoot or timestamps, so each such photo keeps its whole name as its
//!   stem (its own product, unless a barcode joins it to another).
//! - **A numbered sequence is not a product.** A stem group larger than `max_photos_per_product`
//!   whose photos are only numbered (`p_1` … `p_40`, no side word) is a shoot numbered in order:
//!   each of its photos is its own product, as is each photo of a run of counters sharing a
//!   prefix (`photo-000` … `photo-059`). Both are reported as [`Sequence`]s, so the import says
//!   so instead of silently making products of six.
//! - **Dates and times are not split.** A number that ends a run of three or more numbers joined by
//!   the same separator (`2024-01-05`, `2024_01_05`, `14-32-10`) is part of a date or a time, not a
//!   photo number: `2024-01-05.jpg` and `2024-01-06.jpg` are two products. A number after the date
//!   is still one: `2024-01-05_2.jpg` goes with `2024-01-05.jpg`.
//!
//! A part is only stripped when something is left: `_1.jpg` and `front.jpg` are their own stems.
//! Names are compared as the OS gives them (`OsStr`); a name that is not UTF-8 is grouped by its
//! bytes (case folded for ASCII only) and never makes anything panic.
//!
//! ## Order, merge, split
//!
//! A group's photos are in a stable order, front-like names first: `…front`, then the bare stem,
//! then numbered photos by number (`_2` before `_10`), then copies by copy number, then the other
//! side words (top, left, right, side, label, bottom, back, detail, in that order); ties by name,
//! then by input order. A name that is only a side word or a number (`front.jpg`, `2.jpg`, as in a
//! folder per product) orders like one. Groups come in the order of their first photo in the input.
//!
//! [`merge_by_barcode`]: whatever the rule, groups with a photo whose barcode reads the same GTIN
//! (compared by [`gtin_key`], so a UPC-A and its EAN-13 form match) are one product: the first
//! group's photos first, then each joined group's, each in its own order.
//! [`split_oversized`]: a group of more than `max_photos_per_product` photos becomes chunks of that
//! many, each marked with [`Split`], which the review shows. [`plan`] does all three in that order
//! (merge before split, so a merge cannot make a product larger than the cap).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::records::{GroupNote, SequenceNote, SplitNote};
use super::scan::Scanned;
use super::store::Entry;
use crate::stored_path::StoredPath;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::product::gtin_key;

/// `[import] group_by`: how an import's photos are grouped into products.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum GroupBy {
    /// Photos in one folder whose names share a stem (see the module's rules).
    #[default]
    Stem,
    /// Every folder's photos are one product (a folder per product).
    Folder,
    /// Every photo is its own product.
    None,
}

/// `[import] max_photos_per_product`'s default.
pub const DEFAULT_MAX_PHOTOS_PER_PRODUCT: usize = 6;

/// How an enqueue groups its photos: the rule and the size cap (`[import]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grouping {
    pub by: GroupBy,
    /// At least 1.
    pub max_photos: usize,
}

impl Grouping {
    /// Every photo its own product (what `extract` and the window's drops do).
    pub const NONE: Self = Self { by: GroupBy::None, max_photos: DEFAULT_MAX_PHOTOS_PER_PRODUCT };
}

impl Default for Grouping {
    fn default() -> Self {
        Self::NONE
    }
}

/// One product's photos.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Indices into the paths given, in the photo order (front-like first).
    pub photos: Vec<usize>,
    /// Set when the group was larger than `max_photos_per_product` and this is one of its chunks.
    pub split: Option<Split>,
    /// The GTINs (as read) that joined other groups into this one; empty when none did.
    pub merged_by: Vec<String>,
}

/// Which chunk of an over-size group this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// 1-based.
    pub part: usize,
    pub parts: usize,
    /// The photos in the group before it was split.
    pub of_photos: usize,
}

/// Group `paths` by `rule`, merge groups that share a barcode (`barcodes[i]`: the GTINs read from
/// photo `i`; missing entries read nothing), then split groups larger than `max_photos` (at
/// least 1).
pub fn plan<P: AsRef<Path>>(paths: &[P], rule: GroupBy, max_photos: usize, barcodes: &[Vec<String>]) -> Vec<Group> {
    plan_noting(paths, rule, max_photos, barcodes).0
}

/// [`plan`], and the numbered sequences the stem rule found (each of their photos is a product
/// of its own), for the import to report.
pub fn plan_noting<P: AsRef<Path>>(
    paths: &[P],
    rule: GroupBy,
    max_photos: usize,
    barcodes: &[Vec<String>],
) -> (Vec<Group>, Vec<Sequence>) {
    let groups = group_photos(paths, rule);
    let (groups, sequences) =
        if rule == GroupBy::Stem { unpack_sequences(paths, groups, max_photos) } else { (groups, Vec::new()) };
    let groups = merge_by_barcode(groups, barcodes);
    (split_oversized(groups, max_photos), sequences)
}

/// Photos the stem rule found to be a numbered sequence, each queued as a product of its own:
/// indices into the paths given, in number order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sequence {
    pub photos: Vec<usize>,
}

/// The stem rule's groups with its numbered sequences unpacked into products of one photo: a
/// group larger than `max_photos` whose photos are only numbered, and the runs of two or more
/// photos (each alone in its group) named by a shared prefix and a counter of 3 digits or more.
fn unpack_sequences<P: AsRef<Path>>(paths: &[P], groups: Vec<Group>, max_photos: usize) -> (Vec<Group>, Vec<Sequence>) {
    let single = |i: usize| Group { photos: vec![i], split: None, merged_by: Vec::new() };
    let mut out = Vec::with_capacity(groups.len());
    let mut sequences = Vec::new();
    for group in groups {
        let numbered =
            group.photos.iter().all(|&i| matches!(name_parts(paths[i].as_ref()).part, Part::Number(_) | Part::None));
        if group.photos.len() > max_photos.max(1) && numbered {
            sequences.push(Sequence { photos: group.photos.clone() });
            out.extend(group.photos.into_iter().map(single));
        } else {
            out.push(group);
        }
    }
    // Runs of counters: one product each already; found to be reported.
    // (folder, prefix) → (counter, photo index).
    type RunKey = (Vec<u8>, Vec<u8>);
    let mut runs: HashMap<RunKey, Vec<(u64, usize)>> = HashMap::new();
    for group in &out {
        if let [i] = group.photos[..] {
            if let Some((prefix, number)) = counter_of(paths[i].as_ref()) {
                runs.entry((folder_key(paths[i].as_ref()), prefix)).or_default().push((number, i));
            }
        }
    }
    let mut found: Vec<Vec<usize>> = runs
        .into_values()
        .filter(|run| run.len() >= 2)
        .map(|mut run| {
            run.sort_unstable();
            run.into_iter().map(|(_, i)| i).collect()
        })
        .collect();
    found.sort_unstable_by_key(|photos: &Vec<usize>| photos.iter().min().copied());
    sequences.extend(found.into_iter().map(|photos| Sequence { photos }));
    sequences.sort_unstable_by_key(|s| s.photos.iter().min().copied());
    (out, sequences)
}

/// A name that ends with a counter: more digits than a photo number (`IMG_0001`, `DSC01234`,
/// `photo-059`), not part of a date or a time. The prefix before it (case-folded) and its value.
fn counter_of(path: &Path) -> Option<(Vec<u8>, u64)> {
    let stem = path.file_stem()?.as_encoded_bytes();
    let digits = trailing_digits(stem);
    if digits <= MAX_PHOTO_NUMBER_DIGITS || digits > 18 || digits == stem.len() {
        return None;
    }
    let start = stem.len() - digits;
    if SEPARATORS.contains(&stem[start - 1]) && start >= 2 && ends_date_or_time(stem, start - 1) {
        return None;
    }
    let value = stem[start..].iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some((fold_case(&stem[..start]), value))
}

/// What an enqueue hands the store next: the scanned `batch` with the files `held` back before,
/// grouped by `grouping`. Without a grouping every file is its own entry at once. With one, the
/// last folder's files are held back (a folder's files come together from the walk, and a
/// product never spans folders), except after the `last` batch, when everything goes. Skipped
/// files pass through in place; a group of one photo is a plain file unless it is a split part.
/// Also returns the numbered sequences found (each of their photos queued as its own product).
pub(crate) fn entries(
    batch: Vec<Scanned>,
    held: &mut Vec<Scanned>,
    grouping: Grouping,
    last: bool,
) -> (Vec<Entry>, Vec<SequenceNote>) {
    if grouping.by == GroupBy::None {
        return (held.drain(..).chain(batch).map(Entry::File).collect(), Vec::new());
    }
    held.extend(batch);
    let ready = if last {
        std::mem::take(held)
    } else {
        let Some(folder) = held.last().map(|s| folder_key(&scanned_path(s))) else { return (Vec::new(), Vec::new()) };
        let keep = held.iter().rev().take_while(|s| folder_key(&scanned_path(s)) == folder).count();
        let rest = held.split_off(held.len() - keep);
        std::mem::replace(held, rest)
    };
    let mut out = Vec::with_capacity(ready.len());
    let mut photos: Vec<(StoredPath, Option<String>)> = Vec::new();
    for scanned in ready {
        match scanned {
            Scanned::Photo { path, sha256 } => photos.push((path, sha256)),
            skipped @ Scanned::Skipped { .. } => out.push(Entry::File(skipped)),
        }
    }
    let paths: Vec<PathBuf> = photos.iter().map(|(p, _)| p.to_path_buf()).collect();
    let (groups, sequences) = plan_noting(&paths, grouping.by, grouping.max_photos, &[]);
    let notes = sequences
        .iter()
        .filter_map(|s| {
            let (first, last) = (s.photos.first()?, s.photos.last()?);
            let name = |i: usize| photos[i].0.to_path_buf().file_name().map(|n| n.to_string_lossy().into_owned());
            let folder = photos[*first].0.to_path_buf().parent().map(|p| p.display().to_string()).unwrap_or_default();
            Some(SequenceNote::new(folder, name(*first)?, name(*last)?, count(s.photos.len())))
        })
        .collect();
    let mut slots: Vec<Option<(StoredPath, Option<String>)>> = photos.into_iter().map(Some).collect();
    for group in groups {
        let members: Vec<(StoredPath, Option<String>)> =
            group.photos.iter().filter_map(|&i| slots.get_mut(i).and_then(Option::take)).collect();
        let note = group.split.map(|s| GroupNote {
            split: Some(SplitNote { part: count(s.part), parts: count(s.parts), of_photos: count(s.of_photos) }),
            joined_by_barcode: Vec::new(),
        });
        match (members.len(), note) {
            (1, None) => {
                let (path, sha256) = members.into_iter().next().expect("one member");
                out.push(Entry::File(Scanned::Photo { path, sha256 }));
            }
            (_, note) => out.push(Entry::Product { photos: members, note }),
        }
    }
    (out, notes)
}

fn scanned_path(scanned: &Scanned) -> PathBuf {
    match scanned {
        Scanned::Photo { path, .. } | Scanned::Skipped { path, .. } => path.to_path_buf(),
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The groups `rule` makes of `paths`, each in photo order, in the order of their first photo.
pub fn group_photos<P: AsRef<Path>>(paths: &[P], rule: GroupBy) -> Vec<Group> {
    let mut index: HashMap<(Vec<u8>, Vec<u8>), usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let path = path.as_ref();
        let key = match rule {
            GroupBy::None => None,
            GroupBy::Folder => Some((folder_key(path), Vec::new())),
            GroupBy::Stem => Some((folder_key(path), name_parts(path).stem_key)),
        };
        let slot = key.map(|k| *index.entry(k).or_insert(groups.len()));
        match slot {
            Some(g) if g < groups.len() => groups[g].photos.push(i),
            _ => groups.push(Group { photos: vec![i], split: None, merged_by: Vec::new() }),
        }
    }
    for group in &mut groups {
        sort_photos(paths, &mut group.photos);
    }
    groups
}

/// Joins the groups that have photos reading the same GTIN (transitively; `barcodes[i]` are the
/// GTINs read from photo `i`), in the order of their first group: its photos first, then the
/// joined groups' photos, each group's in its own order.
pub fn merge_by_barcode(groups: Vec<Group>, barcodes: &[Vec<String>]) -> Vec<Group> {
    // Union-find over groups.
    let mut parent: Vec<usize> = (0..groups.len()).collect();
    fn root(parent: &mut [usize], mut g: usize) -> usize {
        while parent[g] != g {
            parent[g] = parent[parent[g]];
            g = parent[g];
        }
        g
    }
    let mut owner: HashMap<String, usize> = HashMap::new();
    let mut joined_by: Vec<Vec<String>> = vec![Vec::new(); groups.len()];
    for (g, group) in groups.iter().enumerate() {
        for &photo in &group.photos {
            for gtin in barcodes.get(photo).map(Vec::as_slice).unwrap_or_default() {
                match owner.get(&gtin_key(gtin)) {
                    None => {
                        owner.insert(gtin_key(gtin), g);
                    }
                    Some(&other) => {
                        let (a, b) = (root(&mut parent, other), root(&mut parent, g));
                        if a != b {
                            // The earlier group absorbs the later one.
                            let (keep, gone) = (a.min(b), a.max(b));
                            parent[gone] = keep;
                            let moved = std::mem::take(&mut joined_by[gone]);
                            joined_by[keep].extend(moved);
                            if !joined_by[keep].contains(gtin) {
                                joined_by[keep].push(gtin.clone());
                            }
                        }
                    }
                }
            }
        }
    }
    let mut merged: Vec<Option<Group>> = vec![None; groups.len()];
    for (g, group) in groups.into_iter().enumerate() {
        let r = root(&mut parent, g);
        match &mut merged[r] {
            Some(into) => into.photos.extend(group.photos),
            slot => *slot = Some(group),
        }
    }
    merged
        .into_iter()
        .enumerate()
        .filter_map(|(g, group)| group.map(|group| (g, group)))
        .map(|(g, mut group)| {
            group.merged_by = std::mem::take(&mut joined_by[g]);
            group
        })
        .collect()
}

/// Groups of more than `max_photos` (at least 1) photos become chunks of `max_photos`, in photo
/// order, each marked with its [`Split`].
pub fn split_oversized(groups: Vec<Group>, max_photos: usize) -> Vec<Group> {
    let max = max_photos.max(1);
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        if group.photos.len() <= max {
            out.push(group);
            continue;
        }
        let of_photos = group.photos.len();
        let parts = of_photos.div_ceil(max);
        for (k, chunk) in group.photos.chunks(max).enumerate() {
            out.push(Group {
                photos: chunk.to_vec(),
                split: Some(Split { part: k + 1, parts, of_photos }),
                merged_by: group.merged_by.clone(),
            });
        }
    }
    out
}

/// What the stem rule sees in a file name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NameParts {
    /// The stem, case-folded: what photos of one product share.
    stem_key: Vec<u8>,
    /// The part stripped off, for the photo order.
    part: Part,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    None,
    Number(u32),
    Copy(u32),
    Side(Face),
}

/// The side words, in photo order (front first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Face {
    Front,
    Top,
    Left,
    Right,
    Side,
    Label,
    Bottom,
    Back,
    Detail,
}

const SIDE_WORDS: [(&str, Face); 9] = [
    ("front", Face::Front),
    ("top", Face::Top),
    ("left", Face::Left),
    ("right", Face::Right),
    ("side", Face::Side),
    ("label", Face::Label),
    ("bottom", Face::Bottom),
    ("back", Face::Back),
    ("detail", Face::Detail),
];

const SEPARATORS: [u8; 3] = [b'_', b'-', b' '];

/// Up to this many digits a trailing number is a photo number (more: a counter of a shoot).
const MAX_PHOTO_NUMBER_DIGITS: usize = 2;

/// After a dot, the marketplace export's image variants (Amazon: `SKU.MAIN.jpg`, `SKU.PT01.jpg`,
/// `SKU.SWCH.jpg`): the main image orders first, then the others by number, the swatch last.
fn marketplace_variant(tail: &[u8]) -> Option<Part> {
    if tail.eq_ignore_ascii_case(b"main") {
        return Some(Part::Side(Face::Front));
    }
    if tail.eq_ignore_ascii_case(b"swch") || tail.eq_ignore_ascii_case(b"swatch") {
        return Some(Part::Side(Face::Detail));
    }
    let digits = tail.strip_prefix(b"PT").or_else(|| tail.strip_prefix(b"pt"))?;
    (digits.len() == 2 && digits.iter().all(u8::is_ascii_digit)).then(|| Part::Number(parse_number(digits)))
}

fn folder_key(path: &Path) -> Vec<u8> {
    path.parent().map(|p| p.as_os_str().as_encoded_bytes().to_vec()).unwrap_or_default()
}

fn name_parts(path: &Path) -> NameParts {
    let stem = path.file_stem().or_else(|| path.file_name()).unwrap_or(OsStr::new(""));
    let bytes = stem.as_encoded_bytes();
    let (kept, part) = split_trailing_part(bytes);
    NameParts { stem_key: fold_case(&bytes[..kept]), part }
}

/// How much of `stem` the stem is (a byte length), and the part after it.
fn split_trailing_part(stem: &[u8]) -> (usize, Part) {
    // ` (N)`: a copy.
    if let Some(inner) = stem.strip_suffix(b")") {
        let digits = trailing_digits(inner);
        let before = inner.len() - digits;
        if digits > 0 && before >= 2 && inner[..before].ends_with(b" (") && before > 2 {
            return (before - 2, Part::Copy(parse_number(&inner[before..])));
        }
    }
    // A marketplace export's `.MAIN`, `.PT01`, `.SWCH`.
    if let Some(dot) = stem.iter().rposition(|&b| b == b'.') {
        if dot > 0 {
            if let Some(part) = marketplace_variant(&stem[dot + 1..]) {
                return (dot, part);
            }
        }
    }
    // A separator, then a number or a side word, to the end.
    let Some(sep_at) = stem.iter().rposition(|b| SEPARATORS.contains(b)) else {
        return (stem.len(), Part::None);
    };
    if sep_at == 0 {
        return (stem.len(), Part::None);
    }
    let tail = &stem[sep_at + 1..];
    if !tail.is_empty() && tail.iter().all(u8::is_ascii_digit) {
        if tail.len() <= MAX_PHOTO_NUMBER_DIGITS && !ends_date_or_time(stem, sep_at) {
            return (sep_at, Part::Number(parse_number(tail)));
        }
        return (stem.len(), Part::None);
    }
    for (word, side) in SIDE_WORDS {
        if tail.eq_ignore_ascii_case(word.as_bytes()) {
            return (sep_at, Part::Side(side));
        }
    }
    (stem.len(), Part::None)
}

/// Whether the number after `stem[sep_at]` ends a run of three or more numbers joined by that
/// same separator (`2024-01-05`, `14_32_10`): a date or a time.
fn ends_date_or_time(stem: &[u8], sep_at: usize) -> bool {
    let sep = stem[sep_at];
    let mut numbers = 1;
    let mut end = sep_at;
    loop {
        let digits = trailing_digits(&stem[..end]);
        if digits == 0 {
            break;
        }
        numbers += 1;
        let start = end - digits;
        if start == 0 || stem[start - 1] != sep {
            break;
        }
        end = start - 1;
    }
    numbers >= 3
}

fn trailing_digits(s: &[u8]) -> usize {
    s.iter().rev().take_while(|b| b.is_ascii_digit()).count()
}

fn parse_number(digits: &[u8]) -> u32 {
    digits.iter().fold(0u32, |n, d| n.saturating_mul(10).saturating_add(u32::from(d - b'0')))
}

/// Case folding for comparing stems: Unicode lowercase for UTF-8 names, ASCII for others.
fn fold_case(bytes: &[u8]) -> Vec<u8> {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_lowercase().into_bytes(),
        Err(_) => bytes.to_ascii_lowercase(),
    }
}

/// The part that orders a photo in its group: the stem rule's trailing part, or, for a name that
/// is only a side word or a number (`front.jpg`, `2.jpg`, as in a folder per product), that.
fn order_part(path: &Path) -> Part {
    match name_parts(path) {
        NameParts { part: Part::None, stem_key } => {
            if !stem_key.is_empty() && stem_key.len() <= 9 && stem_key.iter().all(u8::is_ascii_digit) {
                return Part::Number(parse_number(&stem_key));
            }
            SIDE_WORDS
                .iter()
                .find(|(word, _)| word.as_bytes() == stem_key.as_slice())
                .map_or(Part::None, |&(_, side)| Part::Side(side))
        }
        NameParts { part, .. } => part,
    }
}

/// Sorts a group's photo indices into photo order (see the module's notes).
fn sort_photos<P: AsRef<Path>>(paths: &[P], photos: &mut [usize]) {
    photos.sort_by_cached_key(|&i| {
        let path = paths[i].as_ref();
        let rank = match order_part(path) {
            Part::Side(Face::Front) => (0, 0, 0),
            Part::None => (1, 0, 0),
            Part::Number(n) => (2, n, 0),
            Part::Copy(n) => (3, n, 0),
            Part::Side(side) => (4, side as u32, 0),
        };
        let name = path.file_name().map(|n| n.as_encoded_bytes().to_vec()).unwrap_or_default();
        (rank, name, i)
    });
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// Groups as lists of file names (paths as given), for the table.
    fn names(paths: &[&str], groups: &[Group]) -> Vec<Vec<String>> {
        groups.iter().map(|g| g.photos.iter().map(|&i| paths[i].to_string()).collect()).collect()
    }

    fn by(rule: GroupBy, paths: &[&str]) -> Vec<Vec<String>> {
        names(paths, &group_photos(paths, rule))
    }

    #[test]
    fn stem_rule_table() {
        // (files in input order, the groups expected, each in photo order)
        let table: &[(&[&str], &[&[&str]])] = &[
            // The example: one product.
            (
                &["d/sku123_1.jpg", "d/sku123-2.jpg", "d/SKU123 back.jpg", "d/sku123 (3).jpg", "d/sku123.jpg"],
                &[&["d/sku123.jpg", "d/sku123_1.jpg", "d/sku123-2.jpg", "d/sku123 (3).jpg", "d/SKU123 back.jpg"]],
            ),
            (&["sku123.jpg", "sku123_1.jpg"], &[&["sku123.jpg", "sku123_1.jpg"]]),
            // Front first, then the bare stem, numbers by value (not by text), side words, back late.
            (
                &["p_back.jpg", "p_10.jpg", "p_2.jpg", "p.jpg", "p_FRONT.jpg", "p_label.jpg", "p_detail.jpg"],
                &[&["p_FRONT.jpg", "p.jpg", "p_2.jpg", "p_10.jpg", "p_label.jpg", "p_back.jpg", "p_detail.jpg"]],
            ),
            // One trailing part only.
            (&["a_b_2.jpg", "a_b.jpg", "a.jpg"], &[&["a_b.jpg", "a_b_2.jpg"], &["a.jpg"]]),
            (&["sku_back_2.jpg", "sku.jpg"], &[&["sku_back_2.jpg"], &["sku.jpg"]]),
            // Dates and times stay whole; a photo number after a date still counts.
            (&["2024-01-05.jpg", "2024-01-06.jpg"], &[&["2024-01-05.jpg"], &["2024-01-06.jpg"]]),
            (&["2024-01-05.jpg", "2024-01-05_2.jpg"], &[&["2024-01-05.jpg", "2024-01-05_2.jpg"]]),
            (&["shot 14-32-10.jpg", "shot 14-32-11.jpg"], &[&["shot 14-32-10.jpg"], &["shot 14-32-11.jpg"]]),
            (&["x_2024_01_05.jpg", "x_2024_01_06.jpg"], &[&["x_2024_01_05.jpg"], &["x_2024_01_06.jpg"]]),
            // Camera counters (4+ digits) are whole names.
            (&["IMG_0001.jpg", "IMG_0002.jpg"], &[&["IMG_0001.jpg"], &["IMG_0002.jpg"]]),
            (&["IMG_0001.jpg", "IMG_0001 (2).JPG"], &[&["IMG_0001.jpg", "IMG_0001 (2).JPG"]]),
            // Extensions and case do not count.
            (&["Box.JPG", "box_2.jpeg", "BOX-front.png"], &[&["BOX-front.png", "Box.JPG", "box_2.jpeg"]]),
            // Same folder only.
            (
                &["a/sku1.jpg", "b/sku1_2.jpg", "a/sku1_back.jpg"],
                &[&["a/sku1.jpg", "a/sku1_back.jpg"], &["b/sku1_2.jpg"]],
            ),
            // Nothing left to be a stem: the whole name is the stem.
            (
                &["_1.jpg", "front.jpg", "-back.jpg", " (2).jpg"],
                &[&["_1.jpg"], &["front.jpg"], &["-back.jpg"], &[" (2).jpg"]],
            ),
            // Not a side word, not a number, not a copy suffix.
            (
                &["sku_frontal.jpg", "sku_2b.jpg", "sku(2).jpg", "sku (x).jpg", "sku.jpg"],
                &[&["sku_frontal.jpg"], &["sku_2b.jpg"], &["sku(2).jpg"], &["sku (x).jpg"], &["sku.jpg"]],
            ),
            // Dots are not separators; only the last extension goes.
            (&["sku.v2.jpg", "sku.jpg"], &[&["sku.v2.jpg"], &["sku.jpg"]]),
            // A huge number does not overflow; unicode names fold their case.
            (
                &["ÉTÉ_1.jpg", "été.jpg", "n_99999999999999999999.jpg"],
                &[&["été.jpg", "ÉTÉ_1.jpg"], &["n_99999999999999999999.jpg"]],
            ),
        ];
        for (files, expected) in table {
            let expected: Vec<Vec<String>> =
                expected.iter().map(|g| g.iter().map(|s| s.to_string()).collect()).collect();
            assert_eq!(by(GroupBy::Stem, files), expected, "{files:?}");
        }
    }

    /// How files are really named, and what the stem rule makes of them: shop and marketplace
    /// exports group a product's photos; cameras' counters and renamed shoots are one product a
    /// photo, reported as a numbered sequence (so the import says so instead of silently making
    /// products of six).
    #[test]
    fn naming_conventions_table() {
        let seq = |prefix: &str, from: usize, to: usize, width: usize| -> Vec<String> {
            (from..=to).map(|n| format!("d/{prefix}{n:0width$}.jpg")).collect()
        };
        // (the files, the product sizes expected in order, the sequences reported: first, last, count)
        type Row = (&'static str, Vec<String>, Vec<usize>, Vec<(&'static str, &'static str, usize)>);
        let table: Vec<Row> = vec![
            (
                "Shopify-style export, SKU_n",
                ["SKU123_1", "SKU123_2", "SKU123_3", "SKU456_1", "SKU456_2"].map(|n| format!("d/{n}.jpg")).to_vec(),
                vec![3, 2],
                vec![],
            ),
            ("zero-padded photo numbers, SKU_01", seq("ABC_", 1, 4, 2), vec![4], vec![]),
            (
                "side words, SKU-front / SKU-back",
                ["SKU-front", "SKU-back", "SKU-side", "OTHER-front"].map(|n| format!("d/{n}.jpg")).to_vec(),
                vec![3, 1],
                vec![],
            ),
            (
                "Amazon export, ASIN.MAIN / .PT01 / .SWCH",
                ["B00X.MAIN", "B00X.PT01", "B00X.PT02", "B00X.SWCH", "B00Y.MAIN", "B00Y.PT01"]
                    .map(|n| format!("d/{n}.jpg"))
                    .to_vec(),
                vec![4, 2],
                vec![],
            ),
            (
                "camera counter, IMG_0001",
                seq("IMG_", 1, 3, 4),
                vec![1, 1, 1],
                vec![("IMG_0001.jpg", "IMG_0003.jpg", 3)],
            ),
            (
                "camera counter without separator, DSC01234",
                seq("DSC0", 1234, 1236, 4),
                vec![1, 1, 1],
                vec![("DSC01234.jpg", "DSC01236.jpg", 3)],
            ),
            (
                "batch rename, Shoot_001",
                seq("Shoot_", 1, 10, 3),
                vec![1; 10],
                vec![("Shoot_001.jpg", "Shoot_010.jpg", 10)],
            ),
            (
                "the issue's shoot, photo-000 … photo-059",
                seq("photo-", 0, 59, 3),
                vec![1; 60],
                vec![("photo-000.jpg", "photo-059.jpg", 60)],
            ),
            ("numbered past the cap, p_1 … p_14", seq("p_", 1, 14, 1), vec![1; 14], vec![("p_1.jpg", "p_14.jpg", 14)]),
            ("numbered within the cap, p_1 … p_6", seq("p_", 1, 6, 1), vec![6], vec![]),
            (
                "phone timestamps, PXL_date_time",
                ["PXL_20240105_101010123", "PXL_20240105_101512456"].map(|n| format!("d/{n}.jpg")).to_vec(),
                vec![1, 1],
                vec![("PXL_20240105_101010123.jpg", "PXL_20240105_101512456.jpg", 2)],
            ),
            (
                "dates stay whole and are no sequence",
                ["2024-01-05", "2024-01-06", "2024-01-06_2"].map(|n| format!("d/{n}.jpg")).to_vec(),
                vec![1, 2],
                vec![],
            ),
            ("one camera photo is no sequence", seq("IMG_", 7, 7, 4), vec![1], vec![]),
        ];
        for (what, files, sizes, sequences) in table {
            let (groups, found) = plan_noting(&files, GroupBy::Stem, DEFAULT_MAX_PHOTOS_PER_PRODUCT, &[]);
            assert_eq!(groups.iter().map(|g| g.photos.len()).collect::<Vec<_>>(), sizes, "{what}");
            assert!(groups.iter().all(|g| g.split.is_none()), "{what}: nothing is cut into runs of six");
            let found: Vec<(String, String, usize)> = found
                .iter()
                .map(|s| {
                    let name = |i: usize| files[i].trim_start_matches("d/").to_string();
                    (name(s.photos[0]), name(*s.photos.last().unwrap()), s.photos.len())
                })
                .collect();
            let expected: Vec<(String, String, usize)> =
                sequences.iter().map(|(a, b, n)| (a.to_string(), b.to_string(), *n)).collect();
            assert_eq!(found, expected, "{what}");
        }
        // Two runs in two folders are two sequences; the folder rule reports none.
        let mut two = seq("IMG_", 1, 2, 4);
        two.extend(["e/IMG_0001.jpg".to_string(), "e/IMG_0002.jpg".to_string()]);
        assert_eq!(plan_noting(&two, GroupBy::Stem, 6, &[]).1.len(), 2);
        assert!(plan_noting(&two, GroupBy::Folder, 6, &[]).1.is_empty());
    }

    #[test]
    fn folder_and_none_rules() {
        let files = ["a/x.jpg", "b/y.jpg", "a/z_2.jpg", "a/front.jpg", "y.jpg"];
        assert_eq!(
            by(GroupBy::Folder, &files),
            vec![vec!["a/front.jpg", "a/x.jpg", "a/z_2.jpg"], vec!["b/y.jpg"], vec!["y.jpg"]]
        );
        // A folder per product named by side or number: a name that is only one orders like it.
        let files = ["p/BACK.jpg", "p/10.jpg", "p/2.jpg", "p/Front.png", "p/detail.jpg", "p/shelf.jpg"];
        assert_eq!(
            by(GroupBy::Folder, &files),
            vec![vec!["p/Front.png", "p/shelf.jpg", "p/2.jpg", "p/10.jpg", "p/BACK.jpg", "p/detail.jpg"]]
        );
        assert_eq!(by(GroupBy::None, &files), files.iter().map(|f| vec![f.to_string()]).collect::<Vec<_>>());
        assert!(group_photos::<&str>(&[], GroupBy::Stem).is_empty());
    }

    #[cfg(unix)]
    #[test]
    fn names_that_are_not_utf8_group_by_their_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let raw = |b: &[u8]| PathBuf::from(OsStr::from_bytes(b));
        let paths = [
            raw(b"d/SKU\xff_1.JPG"),
            raw(b"d/sku\xff.jpg"),
            raw(b"d/sku\xfe.jpg"),
            raw(b"\xff/\xff"),
            raw(b"d/\xff (2)"),
        ];
        let groups = group_photos(&paths, GroupBy::Stem);
        let photos: Vec<Vec<usize>> = groups.iter().map(|g| g.photos.clone()).collect();
        assert_eq!(photos, vec![vec![1, 0], vec![2], vec![3], vec![4]]);
    }

    #[test]
    fn odd_paths_do_not_panic() {
        let paths = ["", "/", ".", "..", ".jpg", "a/", "()", " (", "_", "-_- (1)", "x (0)", "x (99999999999999)"];
        for rule in [GroupBy::Stem, GroupBy::Folder, GroupBy::None] {
            let groups = plan(&paths, rule, 2, &[]);
            let mut all: Vec<usize> = groups.iter().flat_map(|g| g.photos.clone()).collect();
            all.sort();
            assert_eq!(all, (0..paths.len()).collect::<Vec<_>>(), "{rule:?}: every photo once");
        }
    }

    #[test]
    fn same_gtin_joins_groups_whatever_the_rule() {
        let paths = ["a/front.jpg", "b/back.jpg", "c/other.jpg", "d/upc.jpg", "a/front_2.jpg"];
        let barcodes = vec![
            vec![],
            vec!["4006381333931".to_string()],
            vec!["96385074".to_string()],
            // The same GTIN in its 13-digit form on one photo, 12-digit on another: one product.
            vec!["0036000291452".to_string(), "4006381333931".to_string()],
            vec!["036000291452".to_string()],
        ];
        let groups = merge_by_barcode(group_photos(&paths, GroupBy::Stem), &barcodes);
        assert_eq!(
            names(&paths, &groups),
            vec![vec!["a/front.jpg", "a/front_2.jpg", "b/back.jpg", "d/upc.jpg"], vec!["c/other.jpg"]]
        );
        // As read on the photo that joined them.
        assert_eq!(groups[0].merged_by, vec!["0036000291452".to_string(), "4006381333931".to_string()]);
        assert!(groups[1].merged_by.is_empty());
        let none = merge_by_barcode(group_photos(&paths, GroupBy::None), &barcodes);
        assert_eq!(
            names(&paths, &none),
            vec![vec!["a/front.jpg"], vec!["b/back.jpg", "d/upc.jpg", "a/front_2.jpg"], vec!["c/other.jpg"]]
        );
        // No barcodes (or fewer entries than photos): the groups stay as they are.
        let plain = group_photos(&paths, GroupBy::Stem);
        assert_eq!(merge_by_barcode(plain.clone(), &[]), plain);
        assert_eq!(merge_by_barcode(plain.clone(), &barcodes[..1]), plain);
    }

    #[test]
    fn oversized_groups_are_split_in_photo_order_and_say_so() {
        // A folder per product with more photos than the cap.
        let paths: Vec<String> = (1..=14).map(|n| format!("shoot/p_{n}.jpg")).collect();
        let groups = plan(&paths, GroupBy::Folder, DEFAULT_MAX_PHOTOS_PER_PRODUCT, &[]);
        let sizes: Vec<usize> = groups.iter().map(|g| g.photos.len()).collect();
        assert_eq!(sizes, [6, 6, 2]);
        assert_eq!(groups[0].photos, (0..6).collect::<Vec<_>>());
        assert_eq!(groups[2].split, Some(Split { part: 3, parts: 3, of_photos: 14 }));
        // A stem group with side words too is a product's photos: split, not unpacked.
        let mut sides: Vec<String> = (1..=6).map(|n| format!("shoot/q_{n}.jpg")).collect();
        sides.extend(["shoot/q_front.jpg".to_string(), "shoot/q_back.jpg".to_string()]);
        let groups = plan(&sides, GroupBy::Stem, DEFAULT_MAX_PHOTOS_PER_PRODUCT, &[]);
        assert_eq!(groups.iter().map(|g| g.photos.len()).collect::<Vec<_>>(), [6, 2]);
        assert_eq!(groups[0].photos[0], 6, "the front first");
        // At the cap: not split. A cap of 0 counts as 1.
        assert!(plan(&paths[..6], GroupBy::Stem, 6, &[]).iter().all(|g| g.split.is_none()));
        assert_eq!(plan(&paths[..3], GroupBy::Stem, 0, &[]).len(), 3);
        // The barcode merge happens before the split.
        let barcodes = vec![vec!["96385074".to_string()]; 2];
        let two = ["x/a.jpg", "y/b.jpg"];
        let merged = plan(&two, GroupBy::Stem, 1, &barcodes);
        assert_eq!(merged.len(), 2);
        assert!(merged.iter().all(|g| g.split.map(|s| s.of_photos) == Some(2)));
    }
}
