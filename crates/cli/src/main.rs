//! The `evicortex` command-line tool.

fn main() {}
