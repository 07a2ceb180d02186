//! Kernel parameters that Ferric writes into boot scripts (iPXE scripts, GRUB menus of boot
//! ISOs). They come from settings and from fields a project member may set on its own node
//! (`driver_info.kernel_append_params`, `instance_info.ramdisk_kernel_arguments`), and the
//! script they land in is a program the machine runs at boot: iPXE splits a line into
//! commands at `;`, `||` and `&&` and expands `${…}`; GRUB reads quotes, `$`, `;` and braces.
//!
//! Architecture invariant: every such value passes [`check`] before it is written, and the
//! check is an allow-list of the characters kernel parameters are made of (letters, digits,
//! space and `- _ . , = : / + @ % ~ [ ]`, the brackets for IPv6 URLs), not a deny-list of what today's script languages
//! treat specially. `quiet ; chain http://elsewhere/x` is refused, not written.

use crate::error::DriverError;

/// Whether `c` may appear in kernel parameters written into a boot script.
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            ' ' | '-' | '_' | '.' | ',' | '=' | ':' | '/' | '+' | '@' | '%' | '~' | '[' | ']'
        )
}

/// Refuses `text` (the value of `field`) unless it is one line of plain kernel parameters.
pub fn check(field: &str, text: &str) -> Result<(), DriverError> {
    let refused: String = text.chars().filter(|c| !allowed(*c)).collect();
    if refused.is_empty() {
        return Ok(());
    }
    let mut shown: Vec<String> = Vec::new();
    for c in refused.chars() {
        let name = if c.is_control() {
            format!("'{}'", c.escape_default())
        } else {
            format!("'{c}'")
        };
        if !shown.contains(&name) {
            shown.push(name);
        }
    }
    Err(DriverError::invalid(
        field,
        format!(
            "{field} {text:?} cannot go into a boot script: it contains {}. Kernel parameters \
             may contain only letters, digits, spaces and - _ . , = : / + @ % ~ [ ].",
            shown.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_kernel_parameters_pass() {
        for text in [
            "",
            "console=ttyS0,115200n8 nofb nomodeset",
            "ipa-cafile=/etc/ferric/ca.pem ipa-lldp-timeout=20 rd.shell",
            "root=UUID=0b8a4c1e-2a4b-4c1e-9a4b-0b8a4c1e2a4b ip=dhcp %default%",
            "ipa-api-url=https://10.0.0.1:6385 user@host ~x +y",
        ] {
            assert!(
                check("driver_info.kernel_append_params", text).is_ok(),
                "{text}"
            );
        }
    }

    #[test]
    fn script_syntax_is_refused_with_the_characters_named() {
        for (text, named) in [
            ("quiet ; chain http://elsewhere/x", "';'"),
            ("quiet || shell", "'|'"),
            ("quiet && shell", "'&'"),
            ("a=${net0/mac}", "'$'"),
            ("a=\"b c\"", "'\"'"),
            ("a=b\nchain http://x", "'\\n'"),
            ("a=b #comment", "'#'"),
            ("a=`reboot`", "'`'"),
            ("a={b}", "'{'"),
            ("a=b\\", "'\\'"),
            ("a=é", "'é'"),
        ] {
            let error = check("instance_info.ramdisk_kernel_arguments", text)
                .expect_err(text)
                .to_string();
            assert!(error.contains(named), "{text}: {error}");
            assert!(error.contains("ramdisk_kernel_arguments"), "{error}");
        }
    }
}
