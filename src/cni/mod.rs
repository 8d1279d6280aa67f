//! podtap as a chained CNI plugin (spec 1.0.0 / 1.1.0). (Being written.)

/// Run the CNI plugin protocol: env `CNI_*`, config on stdin, result or error on stdout.
pub fn main() -> i32 {
    println!("{{\"cniVersion\":\"1.0.0\",\"code\":4,\"msg\":\"not implemented yet\"}}");
    1
}
