#[derive(postpone::Job)]
#[job(topic = "u")]
union Bits {
    int: u32,
    float: f32,
}

fn main() {}
