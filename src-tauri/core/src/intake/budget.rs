//! The memory concurrent decodes share ([`DecodeBudget`]), each decode's share estimated from its
//! header before any pixel is read.

use super::*;

/// The memory budget that concurrent decodes share (`[intake] decode_budget_bytes`). Each decode
/// takes its [`decode_estimate`] before it starts and gives it back when it ends; an estimate
/// larger than the whole budget takes all of it, so one huge image still runs, alone. The
/// semaphore is fair: a large share waiting is not overtaken by small ones. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DecodeBudget {
    permits: Arc<tokio::sync::Semaphore>,
    /// The whole budget in [`BUDGET_UNIT`]s (one permit each).
    units: u32,
}

/// One permit of a [`DecodeBudget`].
pub(super) const BUDGET_UNIT: u64 = 1024;

impl DecodeBudget {
    pub fn new(bytes: u64) -> Self {
        let units = Self::units_for(bytes);
        Self { permits: Arc::new(tokio::sync::Semaphore::new(units as usize)), units }
    }

    fn units_for(bytes: u64) -> u32 {
        (bytes / BUDGET_UNIT).clamp(1, u64::from(u32::MAX)) as u32
    }

    pub fn total_bytes(&self) -> u64 {
        u64::from(self.units) * BUDGET_UNIT
    }

    /// The budget for a new setting of `bytes`: this same budget when the size is unchanged, so
    /// that replacing the pipeline (Settings saved, demo mode) keeps the decodes in flight counted
    /// instead of opening a second, empty budget beside them. A new size is a new budget; until
    /// the decodes under the old one end, both bound memory.
    pub fn for_setting(current: Option<&DecodeBudget>, bytes: u64) -> DecodeBudget {
        match current {
            Some(budget) if budget.units == Self::units_for(bytes) => budget.clone(),
            _ => Self::new(bytes),
        }
    }

    /// What no decode holds right now.
    pub fn available_bytes(&self) -> u64 {
        self.permits.available_permits() as u64 * BUDGET_UNIT
    }

    /// Waits until `bytes` (at most the whole budget) are free and holds them until the guard drops.
    pub async fn reserve(&self, bytes: u64) -> tokio::sync::OwnedSemaphorePermit {
        let units = bytes.div_ceil(BUDGET_UNIT).clamp(1, u64::from(self.units)) as u32;
        self.permits.clone().acquire_many_owned(units).await.expect("the decode budget is never closed")
    }
}

/// The memory a decode of `bytes` holds at its peak, estimated from the header alone: the decoded
/// buffer (width × height × bytes per pixel, 16-bit samples counted as two bytes; for the JPEG
/// fast path the DCT-scaled size) plus the 8-bit RGB copy it is converted to. Zero when the file
/// will be refused before any pixel buffer exists (not an image, unsupported, over `max_pixels`,
/// an unreadable header).
pub fn decode_estimate(bytes: &[u8], cfg: &ImageConfig) -> u64 {
    let Ok(format) = detect_format(bytes) else { return 0 };
    let long_edge = cfg.max_long_edge.max(1);
    let over_limit = |w: u64, h: u64| w.saturating_mul(h) > cfg.max_pixels;
    if format == SourceFormat::Jpeg {
        let Ok(mut dec) = turbojpeg::Decompressor::new() else { return 0 };
        let Ok(header) = dec.read_header(bytes) else { return 0 };
        let (w, h) = (header.width as u64, header.height as u64);
        if over_limit(w, h) {
            return 0;
        }
        if !matches!(header.colorspace, turbojpeg::Colorspace::CMYK | turbojpeg::Colorspace::YCCK)
            && !header.is_lossless
        {
            let scaled = header.scaled(jpeg_scaling(w as u32, h as u32, long_edge));
            return (scaled.width as u64) * (scaled.height as u64) * 3;
        }
    }
    let Ok(decoder) = ImageReader::with_format(Cursor::new(bytes), format.image_format()).into_decoder() else {
        return 0;
    };
    let (w, h) = decoder.dimensions();
    let (w, h) = (u64::from(w), u64::from(h));
    if over_limit(w, h) {
        return 0;
    }
    w * h * (u64::from(decoder.color_type().bytes_per_pixel()) + 3)
}
