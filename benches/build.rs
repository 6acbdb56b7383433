//! Builds the bbolt peer (`bbolt/`, Go) as a C archive and links it: Go fetches bbolt at
//! the version `bbolt/go.sum` pins, from the Go module proxy, on the first build.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    for f in ["bbolt/bbolt.go", "bbolt/go.mod", "bbolt/go.sum"] {
        println!("cargo:rerun-if-changed={f}");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let status = Command::new("go")
        .args([
            "build",
            "-buildvcs=false",
            "-trimpath",
            "-buildmode=c-archive",
            "-o",
        ])
        .arg(out.join("libcairnbbolt.a"))
        .arg(".")
        .current_dir("bbolt")
        .env("CGO_ENABLED", "1")
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!("`go build` of the bbolt peer failed ({s})"),
        Err(e) => panic!("the bbolt peer needs Go on the PATH to build: {e}"),
    }
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=cairnbbolt");
}
