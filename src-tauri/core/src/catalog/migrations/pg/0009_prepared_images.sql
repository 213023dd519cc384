-- pg 0009: each photo's prepared image (issue 13: "thumbnails and prepared images in the
-- database"). On a team catalog a photo's file is on the computer that recorded it; the others
-- see the prepared image (what was sent to Gemini: oriented, downscaled, no metadata) in review
-- and extract the product again from it when the file is not on their disk. Server only: a
-- desktop's own SQLite catalog has the files next to it.
--
-- `jpeg` is stored as is (EXTERNAL: a JPEG does not compress, so PostgreSQL does not try);
-- `barcodes_json` is what intake read from its pixels (barcode::Barcode, boxes in its pixels).
-- The newest preparation of a photo replaces an older one (the image settings may have changed).

CREATE TABLE photo_images (
    photo_id      BIGINT  PRIMARY KEY REFERENCES photos (id) ON DELETE CASCADE,
    jpeg          BYTEA   NOT NULL CHECK (length(jpeg) > 0),
    width         BIGINT  NOT NULL CHECK (width > 0),
    height        BIGINT  NOT NULL CHECK (height > 0),
    barcodes_json JSON    NOT NULL,
    stored_at     BIGINT  NOT NULL
);
ALTER TABLE photo_images ALTER COLUMN jpeg SET STORAGE EXTERNAL;
