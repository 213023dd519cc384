//! The few EXIF bytes intake reads: a JPEG's orientation (the rest of the metadata is never kept).

use super::*;

/// The EXIF orientation of a JPEG; `NoTransforms` when absent or unreadable.
pub(super) fn jpeg_exif_orientation(bytes: &[u8]) -> Orientation {
    find_jpeg_exif(bytes)
        .and_then(exif_orientation)
        .and_then(Orientation::from_exif)
        .unwrap_or(Orientation::NoTransforms)
}

/// The TIFF payload of the first APP1 Exif segment before the image data.
pub(super) fn find_jpeg_exif(bytes: &[u8]) -> Option<&[u8]> {
    let mut i = 2; // after SOI
    loop {
        // Markers may be preceded by any number of 0xFF fill bytes.
        while *bytes.get(i)? == 0xFF && *bytes.get(i + 1)? == 0xFF {
            i += 1;
        }
        if *bytes.get(i)? != 0xFF {
            return None;
        }
        let marker = *bytes.get(i + 1)?;
        i += 2;
        match marker {
            0x01 | 0xD0..=0xD7 => continue,
            0xD9 | 0xDA => return None, // EOI or start of scan: no more headers
            _ => {}
        }
        let len = usize::from(u16::from_be_bytes([*bytes.get(i)?, *bytes.get(i + 1)?]));
        if len < 2 {
            return None;
        }
        let segment = bytes.get(i + 2..i + len)?;
        if marker == 0xE1 {
            if let Some(tiff) = segment.strip_prefix(b"Exif\0\0") {
                return Some(tiff);
            }
        }
        i += len;
    }
}

/// Orientation tag (0x0112) of IFD0 in a TIFF structure.
pub(super) fn exif_orientation(tiff: &[u8]) -> Option<u8> {
    let big_endian = match tiff.get(0..2)? {
        b"MM" => true,
        b"II" => false,
        _ => return None,
    };
    let u16_at = |o: usize| -> Option<u16> {
        let b = [*tiff.get(o)?, *tiff.get(o + 1)?];
        Some(if big_endian { u16::from_be_bytes(b) } else { u16::from_le_bytes(b) })
    };
    let u32_at = |o: usize| -> Option<u32> {
        let b: [u8; 4] = tiff.get(o..o + 4)?.try_into().ok()?;
        Some(if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) })
    };
    if u16_at(2)? != 42 {
        return None;
    }
    let ifd = u32_at(4)? as usize;
    let count = usize::from(u16_at(ifd)?);
    for n in 0..count.min(512) {
        let entry = ifd.checked_add(2 + n * 12)?;
        if u16_at(entry)? == 0x0112 {
            let value = match u16_at(entry + 2)? {
                3 => u16_at(entry + 8)?,                   // SHORT, as it should be
                4 => u32_at(entry + 8)? as u16,            // LONG, seen in the wild
                1 | 7 => u16::from(*tiff.get(entry + 8)?), // BYTE / UNDEFINED
                _ => return None,
            };
            return u8::try_from(value).ok().filter(|v| (1..=8).contains(v));
        }
    }
    None
}

/// Builds an APP1 Exif segment (marker included) holding only IFD0 Orientation. For tests,
/// fixtures and the benchmark.
#[doc(hidden)]
pub fn exif_orientation_segment(orientation: u8) -> Vec<u8> {
    let mut tiff = Vec::new();
    tiff.extend_from_slice(b"MM\0\x2a\0\0\0\x08"); // big-endian TIFF, IFD0 at 8
    tiff.extend_from_slice(&1u16.to_be_bytes()); // one entry
    tiff.extend_from_slice(&0x0112u16.to_be_bytes());
    tiff.extend_from_slice(&3u16.to_be_bytes()); // SHORT
    tiff.extend_from_slice(&1u32.to_be_bytes()); // count
    tiff.extend_from_slice(&u16::from(orientation).to_be_bytes());
    tiff.extend_from_slice(&[0, 0]);
    tiff.extend_from_slice(&0u32.to_be_bytes()); // no next IFD
    let mut seg = vec![0xFF, 0xE1];
    seg.extend_from_slice(&((2 + 6 + tiff.len()) as u16).to_be_bytes());
    seg.extend_from_slice(b"Exif\0\0");
    seg.extend_from_slice(&tiff);
    seg
}

/// Inserts an APP1 segment right after the SOI of a JPEG. For tests, fixtures and the benchmark.
#[doc(hidden)]
pub fn insert_jpeg_segment(jpeg: &[u8], segment: &[u8]) -> Vec<u8> {
    let split = if jpeg.starts_with(&[0xFF, 0xD8]) { 2 } else { 0 };
    let mut out = Vec::with_capacity(jpeg.len() + segment.len());
    out.extend_from_slice(&jpeg[..split]);
    out.extend_from_slice(segment);
    out.extend_from_slice(&jpeg[split..]);
    out
}
