//! What the import queue shows: item states, rows, pages, the review detail and per-item events.
//! DTOs for the window (serde + ts-rs; every `i64`/`u64` is a TypeScript `number`).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::barcode::Barcode;
use crate::catalog::{AttemptId, PhotoId, ProductId};
use crate::gemini::Usage;
use crate::pricing::Usd;
use crate::product::{FieldFlag, Product};
use crate::stored_path::StoredPath;
use crate::ErrorReport;

/// A row of `import_items`.
pub type ItemId = i64;

/// Where an item is in the queue.
///
/// `queued → preparing → extracting → ready → saved`, plus `failed` and `skipped`. Preparing and
/// extracting items go back to queued when the app restarts or the import is cancelled; ready
/// items keep their result and are never sent again.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, TS, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum ItemState {
    /// Waiting for a worker.
    Queued,
    /// Read, checked and prepared for upload (and then waiting to be sent).
    Preparing,
    /// Sent to Gemini, or waiting for a free call slot (in batch mode: waiting to be submitted
    /// in a batch).
    Extracting,
    /// In a batch Gemini accepted (batch mode), waiting for its answer.
    Submitted,
    /// Gemini's proposal is stored; waiting for review.
    Ready,
    /// Saved to the catalog.
    Saved,
    /// Failed for its own reasons (bad image, blocked, unreadable answer, ...); can be retried.
    Failed,
    /// Not extracted: not a photo, a duplicate, or discarded in review.
    Skipped,
}

impl ItemState {
    pub const ALL: [ItemState; 8] = [
        Self::Queued,
        Self::Preparing,
        Self::Extracting,
        Self::Submitted,
        Self::Ready,
        Self::Saved,
        Self::Failed,
        Self::Skipped,
    ];

    /// The name as stored and serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Preparing => "preparing",
            Self::Extracting => "extracting",
            Self::Submitted => "submitted",
            Self::Ready => "ready",
            Self::Saved => "saved",
            Self::Failed => "failed",
            Self::Skipped => "skipped",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Waiting or in progress: the states a worker will still move on.
    pub fn is_active(self) -> bool {
        matches!(self, Self::Queued | Self::Preparing | Self::Extracting | Self::Submitted)
    }
}

impl std::fmt::Display for ItemState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who asked for an item. Interactive items (a photo dropped or added in the window, or given to
/// `extract`) get the next free slot ahead of a bulk import's, and the window's Extract view shows
/// those still waiting for review.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, TS, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum ItemOrigin {
    #[default]
    Import,
    Interactive,
}

impl ItemOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Import => "import",
            Self::Interactive => "interactive",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Import, Self::Interactive].into_iter().find(|o| o.as_str() == text)
    }
}

/// A batch of the Batch API (batch mode), as the progress view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct BatchInfo {
    /// `batches/{id}`; `None` while it is being submitted.
    pub name: Option<String>,
    pub state: BatchPhase,
    /// The photos in it.
    pub requests: u32,
    /// When Gemini accepted it (unix ms).
    #[ts(type = "number | null")]
    pub submitted_at: Option<i64>,
    /// When it was last looked at (unix ms).
    #[ts(type = "number | null")]
    pub last_polled_at: Option<i64>,
    /// Why it failed, was cancelled or expired.
    pub error: Option<String>,
}

/// Where a batch is: being submitted, then as Gemini says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum BatchPhase {
    Submitting,
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    Expired,
}

impl BatchPhase {
    pub const ALL: [BatchPhase; 7] =
        [Self::Submitting, Self::Pending, Self::Running, Self::Succeeded, Self::Failed, Self::Cancelled, Self::Expired];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitting => "submitting",
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == text)
    }

    /// Gemini is (or may be) working on it.
    pub fn is_open(self) -> bool {
        matches!(self, Self::Submitting | Self::Pending | Self::Running)
    }
}

/// Why an item is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(export)]
pub enum SkipReason {
    /// A file in a dropped folder that is not a photo (by its extension).
    NotAPhoto,
    /// An image in a format we cannot prepare (e.g. HEIC), by its first bytes.
    UnsupportedFormat,
    /// The file could not be read (missing, no permission).
    Unreadable,
    /// The same bytes (SHA-256) are already a product in the catalog.
    AlreadyInCatalog,
    /// The same bytes are already an item of the queue.
    AlreadyQueued,
    /// The reviewer discarded the item.
    Discarded,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotAPhoto => "not_a_photo",
            Self::UnsupportedFormat => "unsupported_format",
            Self::Unreadable => "unreadable",
            Self::AlreadyInCatalog => "already_in_catalog",
            Self::AlreadyQueued => "already_queued",
            Self::Discarded => "discarded",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::NotAPhoto,
            Self::UnsupportedFormat,
            Self::Unreadable,
            Self::AlreadyInCatalog,
            Self::AlreadyQueued,
            Self::Discarded,
        ]
        .into_iter()
        .find(|r| r.as_str() == text)
    }

    /// A duplicate by content (counted as `duplicates` in the progress).
    pub fn is_duplicate(self) -> bool {
        matches!(self, Self::AlreadyInCatalog | Self::AlreadyQueued)
    }
}

/// A near-duplicate hint: the item's photo looks like (perceptual hash within
/// [`super::NEAR_DUPLICATE_MAX_DISTANCE`] bits) a photo that is a product, or another item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[ts(export)]
pub enum LooksLike {
    /// "looks like product X".
    Product {
        #[ts(type = "number")]
        product_id: ProductId,
        name: String,
        /// Differing bits of the 64-bit hash (0 = visually the same).
        distance: u32,
    },
    /// Looks like another photo in the queue.
    Item {
        #[ts(type = "number")]
        item_id: ItemId,
        path: String,
        /// The other item's proposed name, when it has one.
        name: Option<String>,
        distance: u32,
    },
}

/// Why an item is skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct SkipInfo {
    pub reason: SkipReason,
    /// For a person, e.g. "The same photo … is already product #12 “Granola” in the catalog".
    pub message: String,
    /// The item it duplicates (`already_queued`).
    #[ts(type = "number | null")]
    pub duplicate_of_item: Option<ItemId>,
    /// The product it duplicates (`already_in_catalog`).
    #[ts(type = "number | null")]
    pub duplicate_of_product: Option<ProductId>,
}

/// The proposal, as a list row shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ProposalSummary {
    pub name: String,
    pub brand: Option<String>,
}

/// One item, as the queue list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ImportRow {
    #[ts(type = "number")]
    pub id: ItemId,
    /// For display: lossy (U+FFFD) when the path is not valid UTF-8.
    pub path: String,
    /// The path's exact bytes in lowercase hex, only when it is not valid UTF-8
    /// ([`crate::stored_path`]).
    pub path_bytes: Option<String>,
    /// The last path component, for display.
    pub file_name: String,
    pub state: ItemState,
    /// Who asked for it: interactive items go first and show in the Extract view.
    pub origin: ItemOrigin,
    /// Calls that ended for this item's sake (see the migration).
    pub attempts: u32,
    /// Why it failed, or why it went back to the queue (e.g. `gemini_auth` while stopped).
    pub last_error: Option<ErrorReport>,
    /// Why it is skipped (skipped items only).
    pub skipped: Option<SkipInfo>,
    pub proposal: Option<ProposalSummary>,
    /// How many fields of the proposal are flagged (invalid or uncertain).
    pub flag_count: u32,
    pub looks_like: Option<LooksLike>,
    /// The photo, once the item was prepared.
    #[ts(type = "number | null")]
    pub photo_id: Option<PhotoId>,
    /// The product this item was saved as; for a ready item, the product its photo already is
    /// (a forced re-extract), which saving updates.
    #[ts(type = "number | null")]
    pub product_id: Option<ProductId>,
    #[ts(type = "number")]
    pub updated_at: i64,
    /// How many photos the product has (1, or more for a product of several photos: its first
    /// is `path`).
    pub photo_count: u32,
    /// On a team catalog: the desktop working the item now (`user@host #pid`), while it is
    /// preparing or extracting; `None` otherwise, and always on a local catalog.
    pub worked_by: Option<String>,
    /// On a team catalog: the computer that queued the item (its files are on that disk); `None`
    /// on a local catalog.
    pub queued_on: Option<String>,
    /// The photo's hash once the item was prepared: the window loads its thumbnail by it (see
    /// [`crate::catalog::ProductSummary::photo_sha256`]).
    pub photo_sha256: Option<String>,
}

/// A page of the queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ImportPage {
    /// Items matching the filter, all pages together.
    #[ts(type = "number")]
    pub total: u64,
    pub rows: Vec<ImportRow>,
}

/// The Gemini call behind a proposal, for the review pane's "raw" view and the CLI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct AttemptInfo {
    #[ts(type = "number")]
    pub id: AttemptId,
    pub model: String,
    #[ts(type = "number")]
    pub latency_ms: u64,
    pub usage: Option<Usage>,
    pub raw_response: Option<String>,
    /// What the attempt cost; `None`: price unknown (or no usage).
    pub cost_usd: Option<Usd>,
    /// Billed at the Batch API's discount.
    pub batch: bool,
}

/// Everything review needs about one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ImportItemDetail {
    pub row: ImportRow,
    pub sha256: Option<String>,
    /// What Gemini proposed.
    pub proposal: Option<Product>,
    pub flags: Vec<FieldFlag>,
    pub attempt: Option<AttemptInfo>,
    /// The barcodes read from its photos when it was last prepared (each with its photo's
    /// index in `photos`); `None`: not prepared (yet).
    pub barcodes: Option<Vec<Barcode>>,
    /// Every photo of the product, in the order sent (the first is `row.path`).
    pub photos: Vec<ItemPhoto>,
    /// Where each field of the proposal was read (its attempt's; the GTIN's is the barcode's when
    /// one was read): photo index and box_2d.
    pub sources: Vec<crate::product::FieldSource>,
    /// What grouping did to this product's photos (split from a larger group), when anything.
    pub group: Option<GroupNote>,
}

/// One photo of an item's product.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ItemPhoto {
    /// For display: lossy (U+FFFD) when the path is not valid UTF-8.
    pub path: String,
    /// The path's exact bytes in lowercase hex, only when it is not valid UTF-8.
    pub path_bytes: Option<String>,
    pub file_name: String,
    /// The photo in the catalog once the item was prepared.
    #[ts(type = "number | null")]
    pub photo_id: Option<PhotoId>,
    /// That photo's hash, which its thumbnail is loaded by (see
    /// [`crate::catalog::ProductSummary::photo_sha256`]).
    pub photo_sha256: Option<String>,
}

/// What grouping did to a product's photos, stored with the item (`group_json`) for the review.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct GroupNote {
    /// The group had more photos than `[import] max_photos_per_product`: this is one part of it.
    pub split: Option<SplitNote>,
    /// Photos that joined this product after it was prepared because they show the same barcode
    /// (these GTINs); Gemini's proposal was made without them.
    #[serde(default)]
    pub joined_by_barcode: Vec<String>,
}

/// Which part of an over-size group an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct SplitNote {
    /// 1-based.
    pub part: u32,
    pub parts: u32,
    /// The photos in the group before it was split.
    pub of_photos: u32,
}

/// An item changed state. The window refreshes the visible row; the CLI prints finished items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct ItemChanged {
    #[ts(type = "number")]
    pub id: ItemId,
    pub state: ItemState,
    /// [`super::ImportProgress::changes`] after this change.
    #[ts(type = "number")]
    pub change: u64,
}

/// What a drop or a CLI argument list added to the queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct EnqueueReport {
    /// New items waiting for extraction.
    pub queued: u32,
    /// Skipped as duplicates (same bytes in the catalog or in the queue).
    pub duplicates: u32,
    /// Skipped for another reason (not a photo, unsupported, unreadable).
    pub skipped: u32,
    /// Already listed (same path, same bytes): nothing to do, e.g. when a run resumes.
    pub unchanged: u32,
    /// Photos the grouping rule found to be a numbered sequence rather than one product: each
    /// was queued as a product of its own (see `grouping`'s stem rule).
    #[serde(default)]
    pub sequences: Vec<SequenceNote>,
}

/// A numbered sequence of photos in one folder (a shoot renamed in order, a camera's counter),
/// each queued as a product of its own, as the import reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct SequenceNote {
    /// The folder, for display.
    pub folder: String,
    /// The first and the last photo's file names, in number order.
    pub first: String,
    pub last: String,
    pub photos: u32,
    /// What the import says of it (the CLI's note, the window's notice).
    pub message: String,
}

impl SequenceNote {
    pub fn new(folder: String, first: String, last: String, photos: u32) -> Self {
        let message = format!(
            "{} photos named {} … {} look like a numbered sequence, not one product: each is its own product \
             (photos that show the same barcode are still joined). If each folder holds one product, set \
             [import] group_by = \"folder\" (or import with --group-by folder).",
            photos, first, last
        );
        Self { folder, first, last, photos, message }
    }
}

/// What queueing files did, and the item that stands for each file, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct Enqueued {
    pub report: EnqueueReport,
    pub files: Vec<EnqueuedFile>,
}

/// One file given to [`super::ImportQueue::enqueue_files`] and where it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct EnqueuedFile {
    /// For display: lossy (U+FFFD) when the path is not valid UTF-8.
    pub path: String,
    /// The path's exact bytes in lowercase hex, only when it is not valid UTF-8
    /// ([`crate::stored_path`]).
    pub path_bytes: Option<String>,
    /// The file's own row: new, listed before (the same path and bytes), or skipped.
    #[ts(type = "number")]
    pub item: ItemId,
    /// The item whose result stands for this file: `item` itself, or, for a duplicate of a photo
    /// in the queue, the item with the same bytes (its proposal is this file's; no second call).
    #[ts(type = "number")]
    pub result_of: ItemId,
}

impl EnqueuedFile {
    pub fn stored_path(&self) -> StoredPath {
        StoredPath::from_text_and_hex(&self.path, self.path_bytes.as_deref())
    }
}

impl ImportRow {
    pub fn stored_path(&self) -> StoredPath {
        StoredPath::from_text_and_hex(&self.path, self.path_bytes.as_deref())
    }
}

impl std::ops::AddAssign for EnqueueReport {
    fn add_assign(&mut self, other: Self) {
        self.queued += other.queued;
        self.duplicates += other.duplicates;
        self.skipped += other.skipped;
        self.unchanged += other.unchanged;
        self.sequences.extend(other.sequences);
    }
}

/// What [`super::ImportQueue::undo_save_all`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, TS)]
#[ts(export)]
pub struct UndoReport {
    /// Back to ready; the products their save created are gone.
    #[ts(type = "Array<number>")]
    pub restored: Vec<ItemId>,
    /// Left saved: the product changed since (edited, saved again), or the save did not create it,
    /// or the item is no longer saved.
    #[ts(type = "Array<number>")]
    pub kept: Vec<ItemId>,
}
