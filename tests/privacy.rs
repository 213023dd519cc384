//! What leaves the machine, proven at the wire: the real binary extracts a photo that carries
//! location metadata and a telling file name, against the fake Gemini on 127.0.0.1, and the test
//! reads every request the server received and every file the app wrote. SECURITY.md cites it.

use std::path::Path;
use std::process::{Command, Output};

use base64::Engine as _;
use fake_gemini::{FakeGemini, FakeOptions};

const KEY: &str = "AIzaPRIVACY-test-key-9d41";
/// Stands for anything the original file carries besides its pixels (GPS position, camera
/// serial, the photographer's comment).
const METADATA: &str = "GPS-48.8584N-2.2945E-serial-XJ77";
/// The file and folder names say who and where; they are the user's, not Google's.
const NAME: &str = "client-acme-confidential";

async fn cli(data_dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_product-extractor"));
    cmd.args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GEMINI_BASE_URL")
        .env_remove("GEMINI_MODEL")
        .env("PRODUCT_EXTRACTOR_DATA_DIR", data_dir)
        .env("PRODUCT_EXTRACTOR_KEYRING_SERVICE", format!("product-extractor-test:{}", data_dir.display()));
    for (k, v) in env {
        cmd.env(k, v);
    }
    tokio::task::spawn_blocking(move || cmd.output().unwrap()).await.unwrap()
}

/// The fixture with a JPEG comment (COM) and an XMP packet (APP1) holding [`METADATA`], next to
/// the Exif block it already has.
fn photo_with_metadata() -> Vec<u8> {
    let original = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/product.jpg")).unwrap();
    let segment = |marker: u8, payload: &[u8]| {
        let mut s = vec![0xFF, marker];
        s.extend_from_slice(&((payload.len() + 2) as u16).to_be_bytes());
        s.extend_from_slice(payload);
        s
    };
    let xmp =
        format!("http://ns.adobe.com/xap/1.0/\0<x:xmpmeta><rdf:Description exif:GPS=\"{METADATA}\"/></x:xmpmeta>");
    let with_xmp = pe_core::intake::insert_jpeg_segment(&original, &segment(0xE1, xmp.as_bytes()));
    let with_both = pe_core::intake::insert_jpeg_segment(&with_xmp, &segment(0xFE, METADATA.as_bytes()));
    assert!(contains(&with_both, b"Exif") && contains(&with_both, METADATA.as_bytes()));
    with_both
}

/// The markers of a JPEG's segments up to the scan (where metadata lives), checking its shape.
fn jpeg_markers(jpeg: &[u8]) -> Vec<u8> {
    assert!(jpeg.starts_with(&[0xFF, 0xD8]), "the upload is not a JPEG");
    let (mut at, mut markers) = (2, Vec::new());
    while at + 4 <= jpeg.len() {
        assert_eq!(jpeg[at], 0xFF, "a malformed segment at {at}");
        let marker = jpeg[at + 1];
        markers.push(marker);
        if marker == 0xDA {
            break;
        }
        at += 2 + usize::from(u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]));
    }
    assert_eq!(markers.last(), Some(&0xDA), "no scan in the upload");
    markers
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Every file under `dir` (the catalog and its WAL, the config, the logs), read as bytes.
fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn only_the_prepared_pixels_and_the_prompt_leave_the_machine_and_the_key_only_in_a_header() {
    let fake = FakeGemini::start(FakeOptions { api_keys: vec![KEY.into()], ..FakeOptions::default() }).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let shoot = tempfile::tempdir().unwrap();
    let folder = shoot.path().join(NAME);
    std::fs::create_dir(&folder).unwrap();
    let file = folder.join(format!("{NAME}.jpg"));
    let original = photo_with_metadata();
    std::fs::write(&file, &original).unwrap();

    let env = [("GEMINI_API_KEY", KEY), ("GEMINI_BASE_URL", &fake.base_url() as &str)];
    let out = cli(data.path(), &env, &["extract", "--json", "--save", file.to_str().unwrap()]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let requests = fake.requests();
    let generate: Vec<_> = requests.iter().filter(|r| r.path.ends_with(":generateContent")).collect();
    assert_eq!(generate.len(), 1, "one call for one photo: {:?}", requests.iter().map(|r| &r.path).collect::<Vec<_>>());
    for r in &requests {
        // The key travels in the x-goog-api-key header, never in the URL.
        assert!(r.had_key_header && !r.had_key_query, "{} {}", r.method, r.path);
        let seen = format!("{} {} {:?} {}", r.method, r.path, r.query, r.body);
        assert!(!seen.contains(KEY), "the key is in a request's URL or body: {seen}");
        assert!(!seen.contains(NAME), "the file or folder name left the machine: {seen}");
        assert!(!seen.contains(METADATA), "the photo's metadata left the machine: {seen}");
    }

    // The body is the prompt, the schema and the settings, and one image: nothing else.
    let body = &generate[0].body;
    let mut top: Vec<&str> = body.as_object().unwrap().keys().map(String::as_str).collect();
    top.sort_unstable();
    assert_eq!(top, ["contents", "generationConfig", "systemInstruction"], "{body}");
    let system = body["systemInstruction"]["parts"][0]["text"].as_str().unwrap();
    assert_eq!(system, pe_core::gemini::system_instruction());
    let parts = body["contents"][0]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 2, "{body}");
    let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    assert_eq!(texts, [pe_core::gemini::USER_PROMPT]);
    let image = parts.iter().find_map(|p| p.get("inlineData")).expect("one inline image");
    assert_eq!(image["mimeType"], "image/jpeg");
    let sent = base64::engine::general_purpose::STANDARD.decode(image["data"].as_str().unwrap()).unwrap();

    // The image is the prepared one: re-encoded, no Exif, XMP or comment segment survives.
    assert_ne!(sent, original);
    for marker in [&b"Exif"[..], b"http://ns.adobe.com/xap", METADATA.as_bytes()] {
        assert!(!contains(&sent, marker), "the uploaded image still holds {:?}", String::from_utf8_lossy(marker));
    }
    let markers = jpeg_markers(&sent);
    assert!(
        markers.iter().all(|m| !matches!(m, 0xE1..=0xEF | 0xFE)),
        "metadata segments (APP1-APP15, COM) in the upload: {markers:02X?}"
    );

    // The key is in none of the files the app wrote: catalog, WAL, config, logs.
    let written = files_under(data.path());
    assert!(
        written.iter().any(|(p, _)| p.ends_with(pe_core::catalog::FILE_NAME)),
        "{:?}",
        written.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    for (path, bytes) in &written {
        assert!(!contains(bytes, KEY.as_bytes()), "the API key is stored in {path}");
    }
}
