// The guide, one module per chapter, from the Markdown files in `docs/guide/`. Every Rust code block
// in them runs as a doctest, so what they show compiles and works.
//
// The chapters link to each other as `chapter.md`, which reads right on a repository host; here the
// definitions of `src/guide_links.md` come first, so those links go to the chapters' modules instead.
#![doc = include_str!("guide_links.md")]
#![doc = include_str!("../docs/guide/README.md")]

/// One chapter: its links to the other chapters, then its file.
macro_rules! chapter {
    ($(#[$attr:meta])* $name:ident, $file:literal) => {
        $(#[$attr])*
        #[doc = include_str!("guide_links.md")]
        #[doc = include_str!(concat!("../docs/guide/", $file))]
        pub mod $name {}
    };
}

chapter!(getting_started, "getting-started.md");
chapter!(concepts, "concepts.md");
chapter!(retries, "retries.md");
chapter!(dead_letters, "dead-letters.md");
chapter!(cookbook_order_timeout, "cookbook-order-timeout.md");
chapter!(cookbook_webhooks, "cookbook-webhooks.md");
chapter!(periodic, "periodic.md");
chapter!(flow_control, "flow-control.md");
chapter!(fairness, "fairness.md");
chapter!(middleware, "middleware.md");
chapter!(unique, "unique.md");
chapter!(results, "results.md");
chapter!(batches, "batches.md");
chapter!(operating, "operating.md");
chapter!(deploying_redis, "deploying-redis.md");
chapter!(guarantees, "guarantees.md");
chapter!(testing, "testing.md");
chapter!(performance, "performance.md");
chapter!(troubleshooting, "troubleshooting.md");
chapter!(migrating, "migrating.md");
chapter!(versioning, "versioning.md");
