//! Compiles the eBPF data path with clang into $OUT_DIR: bpf/ilnp_dp.c (= ilnp_egress.c +
//! ilnp_ingress.c + ilnp_sockops.c) twice, `ilnp_dp.o` (maps not pinned) and
//! `ilnp_dp_pin.o` (maps pinned by name, for a daemon with a pin directory), which aya
//! loads; and bpf/ilnp_route.c (the lwt xmit program) once, `ilnp_route.o`, which libbpf
//! loads with the maps of the first (its maps are never pinned by it). src/bpf/ embeds all three.
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCES: &[&str] = &[
    "ilnp_dp.c",
    "ilnp_egress.c",
    "ilnp_ingress.c",
    "ilnp_ingress_v4.h",
    "ilnp_sockops.c",
    "ilnp_route.c",
    "ilnp_common.h",
    "ilnp_maps.h",
];

fn main() {
    let bpf_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bpf");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    for f in SOURCES {
        println!("cargo:rerun-if-changed={}", bpf_dir.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=CLANG");
    // extra -D flags for a measurement build (docs/benchmarks.md § Without the nonce)
    println!("cargo:rerun-if-env-changed=ILNP_BPF_DEFINES");
    let extra = std::env::var("ILNP_BPF_DEFINES").unwrap_or_default();
    let extra: Vec<&str> = extra.split_whitespace().collect();
    // ilnpd warns at load when the data path is such a build
    println!("cargo:rustc-env=ILNP_BPF_DEFINES={}", extra.join(" "));
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // <asm/types.h> lives in the multiarch directory on Debian/Ubuntu
    let triple = Command::new("gcc")
        .arg("-dumpmachine")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| format!("{}-linux-gnu", std::env::var("CARGO_CFG_TARGET_ARCH").unwrap()));
    let dp = bpf_dir.join("ilnp_dp.c");
    compile(&clang, &triple, &dp, &out.join("ilnp_dp.o"), &extra);
    let pin: Vec<&str> = extra.iter().copied().chain(["-DILNP_PIN_MAPS"]).collect();
    compile(&clang, &triple, &dp, &out.join("ilnp_dp_pin.o"), &pin);
    compile(&clang, &triple, &bpf_dir.join("ilnp_route.c"), &out.join("ilnp_route.o"), &extra);
}

fn compile(clang: &str, triple: &str, src: &Path, out: &Path, defines: &[&str]) {
    // -g: aya needs the BTF that describes the `.maps` section
    let output = Command::new(clang)
        .args(["-O2", "-g", "-Wall", "-Werror", "-target", "bpf"])
        .args(defines)
        .arg(format!("-I/usr/include/{triple}"))
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "\n\nilnpd build: cannot run `{clang}` to compile the eBPF data path ({e}).\n\
                 Install clang (>= 14), llvm and libbpf-dev (Debian/Ubuntu: \
                 `apt-get install clang llvm libbpf-dev`), or set CLANG=/path/to/clang.\n\n"
            )
        });
    if !output.status.success() {
        panic!(
            "\n\nilnpd build: `{clang}` failed to compile {} {defines:?}:\n{}\n",
            src.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
