use super::*;

fn small() -> HeadLimits {
    HeadLimits {
        max_uri_bytes: 16,
        max_header_bytes: 40,
        max_headers: 3,
    }
}

/// The verdict of `input` fed whole.
fn whole(input: &[u8], limits: HeadLimits) -> HeadVerdict {
    HeadScan::new(limits).feed(input)
}

/// The verdict of `input` fed one byte more at a time, stopping at the
/// first final one.
fn trickled(input: &[u8], limits: HeadLimits) -> HeadVerdict {
    let mut scan = HeadScan::new(limits);
    for n in 1..=input.len() {
        let v = scan.feed(&input[..n]);
        if v != HeadVerdict::Partial {
            return v;
        }
    }
    HeadVerdict::Partial
}

#[test]
fn a_normal_head_is_complete_where_its_blank_line_ends() {
    let head = b"GET /v1/models HTTP/1.1\r\nhost: a\r\n\r\nBODY";
    assert_eq!(
        whole(head, HeadLimits::default()),
        HeadVerdict::Complete(head.len() - 4)
    );
    // Bare `\n` line ends and leading empty lines are read as pingora reads them.
    let bare = b"\r\n\nGET / HTTP/1.1\nhost: a\n\n";
    assert_eq!(
        whole(bare, HeadLimits::default()),
        HeadVerdict::Complete(bare.len())
    );
}

#[test]
fn a_long_uri_is_414_even_before_its_line_ends() {
    let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(16));
    assert_eq!(whole(long.as_bytes(), small()), HeadVerdict::UriTooLong);
    assert_eq!(HeadVerdict::UriTooLong.status(), Some(414));
    // Unfinished: the target so far is already too long.
    let partial = format!("GET /{}", "a".repeat(16));
    assert_eq!(whole(partial.as_bytes(), small()), HeadVerdict::UriTooLong);
    // Exactly at the limit passes.
    let at = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(15));
    assert_eq!(
        whole(at.as_bytes(), small()),
        HeadVerdict::Complete(at.len())
    );
}

#[test]
fn the_uri_is_checked_before_the_header_total() {
    let both = format!(
        "GET /{} HTTP/1.1\r\nx: {}\r\n\r\n",
        "a".repeat(40),
        "b".repeat(100)
    );
    assert_eq!(whole(both.as_bytes(), small()), HeadVerdict::UriTooLong);
}

#[test]
fn headers_past_the_total_or_the_count_are_431() {
    let big = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "b".repeat(40));
    assert_eq!(whole(big.as_bytes(), small()), HeadVerdict::HeaderTooLarge);
    assert_eq!(HeadVerdict::HeaderTooLarge.status(), Some(431));
    // A header still arriving that is already past the total.
    let trickling = format!("GET / HTTP/1.1\r\nx: {}", "b".repeat(40));
    assert_eq!(
        whole(trickling.as_bytes(), small()),
        HeadVerdict::HeaderTooLarge
    );
    let many = "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\n\r\n";
    assert_eq!(whole(many.as_bytes(), small()), HeadVerdict::HeaderTooLarge);
    let three = "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\n\r\n";
    assert_eq!(
        whole(three.as_bytes(), small()),
        HeadVerdict::Complete(three.len())
    );
}

#[test]
fn a_one_mib_header_is_431_with_the_defaults() {
    let big = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "b".repeat(1 << 20));
    assert_eq!(
        whole(big.as_bytes(), HeadLimits::default()),
        HeadVerdict::HeaderTooLarge
    );
}

#[test]
fn any_split_gives_the_verdict_of_the_whole() {
    let inputs: Vec<Vec<u8>> = vec![
        b"GET /v1/x HTTP/1.1\r\nhost: a\r\n\r\n".to_vec(),
        format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(30)).into_bytes(),
        format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "b".repeat(60)).into_bytes(),
        b"GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\n\r\n".to_vec(),
        b"\r\n\r\nPOST /a HTTP/1.1\nx: y\n\nrest".to_vec(),
        b"GET / HTTP/1.1\r\nx: y".to_vec(),
    ];
    for input in &inputs {
        let expected = whole(input, small());
        assert_eq!(trickled(input, small()), expected, "{input:?}");
        for cut in 0..=input.len() {
            let mut scan = HeadScan::new(small());
            let first = scan.feed(&input[..cut]);
            let v = if first == HeadVerdict::Partial {
                scan.feed(input)
            } else {
                first
            };
            assert_eq!(v, expected, "{input:?} cut at {cut}");
        }
    }
}

/// Found by the `head_scan` fuzzer: an unfinished request line was measured
/// from its first space to its end, version included, so a target at the
/// limit was refused when the line arrived in pieces and passed whole.
#[test]
fn a_target_at_the_limit_passes_in_pieces_too() {
    let line = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(15));
    let input = line.as_bytes();
    let expected = HeadVerdict::Complete(input.len());
    assert_eq!(whole(input, small()), expected);
    assert_eq!(trickled(input, small()), expected);
    // A `\r` that ends the line is not part of the target.
    let one_space = format!("GET /{}\r\n\r\n", "a".repeat(15));
    assert_eq!(
        trickled(one_space.as_bytes(), small()),
        whole(one_space.as_bytes(), small())
    );
}

/// Also found by the fuzzer: a method longer than the limit was refused in
/// pieces (no space yet) but passed whole; now it is refused both ways.
#[test]
fn a_method_longer_than_the_uri_limit_is_414_either_way() {
    let input = format!("{} / HTTP/1.1\r\n\r\n", "M".repeat(17));
    assert_eq!(whole(input.as_bytes(), small()), HeadVerdict::UriTooLong);
    assert_eq!(trickled(input.as_bytes(), small()), HeadVerdict::UriTooLong);
}

/// Found by the fuzzer: headers exactly at `max_header_bytes` and the blank
/// line's `\r` arriving alone counted the `\r` as a header byte (431),
/// while the same head whole was complete.
#[test]
fn headers_at_the_limit_then_a_split_blank_line_are_complete() {
    // 40 bytes of header lines: `x: ` + 35 + `\r\n`.
    let head = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "b".repeat(35));
    let input = head.as_bytes();
    let expected = HeadVerdict::Complete(input.len());
    assert_eq!(whole(input, small()), expected);
    assert_eq!(trickled(input, small()), expected);
    // One byte more is over, however it arrives.
    let over = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "b".repeat(36));
    assert_eq!(whole(over.as_bytes(), small()), HeadVerdict::HeaderTooLarge);
    assert_eq!(
        trickled(over.as_bytes(), small()),
        HeadVerdict::HeaderTooLarge
    );
}
