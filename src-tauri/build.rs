fn main() {
    // A custom capabilities path: tauri-build does not emit rerun-if-changed for it.
    println!("cargo:rerun-if-changed=src-tauri/capabilities");
    tauri_build::try_build(tauri_build::Attributes::new().capabilities_path_pattern("./src-tauri/capabilities/**/*"))
        .expect("failed to run tauri-build");
}
