//! Compiles bpf/ilnp_tc.c with clang into $OUT_DIR/ilnp_tc.o (embedded by src/bpf.rs).
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bpf");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("ilnp_tc.o");
    for f in ["ilnp_tc.c", "ilnp_maps.h"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let triple = Command::new("gcc")
        .arg("-dumpmachine")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "x86_64-linux-gnu".into());
    let status = Command::new("clang")
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-I/usr/include/{triple}"))
        .arg("-c")
        .arg(root.join("ilnp_tc.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run clang to build the eBPF programs ({e}); install clang, llvm and libbpf-dev (scripts/setup.sh does)"));
    assert!(status.success(), "clang failed to compile bpf/ilnp_tc.c");
}
