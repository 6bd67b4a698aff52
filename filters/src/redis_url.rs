//! Redis addresses as configs write them: `HOST:PORT` or a `redis://` URL
//! whose user and password may be `${VAR}`s, read from the environment when
//! the connection is made (never kept in a config or a result). Shared by the
//! load half's redis steps and the fleet-wide rate limit store.

/// `HOST:PORT`, or `redis://[[USER]:PASSWORD@]HOST:PORT[/DB]` where the
/// user and password may be `${VAR}`s (checked set in `validate`, read at
/// connect time, never written to a result).
pub fn check_redis_target(t: &str) -> Result<String, String> {
    let bad = || {
        format!(
            "must be HOST:PORT like 127.0.0.1:6379, or redis://[:PASSWORD@]HOST:PORT[/DB], found `{t}`"
        )
    };
    if t.starts_with("rediss://") {
        return Err("rediss:// (Redis over TLS) is not supported yet".to_owned());
    }
    let Some(url) = t.strip_prefix("redis://") else {
        return check_address(t).map_err(|_| bad());
    };
    // The password may hold `@` and `/`: the host is after the last `@`.
    let at_host = url.rsplit_once('@').map_or(url, |(_, h)| h);
    let (address, db) = at_host.split_once('/').unwrap_or((at_host, ""));
    check_address(address).map_err(|_| bad())?;
    if !(db.is_empty() || db.parse::<u32>().is_ok()) {
        return Err(format!("{}: the database `{db}` is not a number", bad()));
    }
    Ok(t.to_owned())
}

/// `HOST:PORT` with a port number and no scheme.
fn check_address(t: &str) -> Result<String, String> {
    let bad = || format!("must be HOST:PORT like 127.0.0.1:6379, found `{t}`");
    let (host, port) = t.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || host.contains('/') || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(bad());
    }
    Ok(t.to_owned())
}

/// `${VAR}` replaced by the variable's value.
pub fn expand_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("${") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let close = after
            .find('}')
            .ok_or_else(|| "`${` without its `}`".to_owned())?;
        let name = &after[..close];
        let value = env(name).ok_or_else(|| format!("environment variable `{name}` is not set"))?;
        out.push_str(&value);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// What to open for a checked target: `HOST:PORT` as `redis://HOST:PORT`, a
/// `redis://` URL with its `${VAR}`s replaced by `env`'s values.
pub fn redis_connect_url(
    target: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    if target.starts_with("redis://") {
        expand_env(target, env)
    } else {
        Ok(format!("redis://{target}"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_url_has_its_variables_read_and_a_bare_address_its_scheme() {
        let env = |name: &str| (name == "PW").then(|| "s3cret".to_owned());
        assert_eq!(
            redis_connect_url("127.0.0.1:6379", &env).unwrap(),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(
            redis_connect_url("redis://:${PW}@127.0.0.1:6379/2", &env).unwrap(),
            "redis://:s3cret@127.0.0.1:6379/2"
        );
        assert_eq!(
            redis_connect_url("redis://:${NOPE}@127.0.0.1:6379", &env).unwrap_err(),
            "environment variable `NOPE` is not set"
        );
    }
}
