//! Compiles the long double shim (INCRBYFLOAT computes in 80-bit `long
//! double`, which Rust lacks).

fn main() {
    println!("cargo:rerun-if-changed=csrc/longdouble.c");
    cc::Build::new().file("csrc/longdouble.c").warnings(true).compile("sluice_longdouble");
}
