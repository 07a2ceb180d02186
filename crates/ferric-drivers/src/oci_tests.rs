//! The pure parts of OCI image sources: references, pull secrets, manifest choice.

use serde_json::json;

use super::*;

const HEX: &str = "0a175cf13c651f44750d6a5cf0cf2f75d933bd591315d77e19105e5446b73a86";

#[test]
fn references_parse_with_tags_digests_and_ports() {
    let tagged = Reference::parse("oci://registry.example:5000/metal3/disk:v1.2").unwrap();
    assert_eq!(tagged.registry, "registry.example:5000");
    assert_eq!(tagged.host(), "registry.example");
    assert_eq!(tagged.repository, "metal3/disk");
    assert_eq!(tagged.manifest_reference(), "v1.2");
    let latest = Reference::parse("oci://quay.io/org/image").unwrap();
    assert_eq!(latest.tag.as_deref(), Some("latest"));
    let pinned = Reference::parse(&format!("oci://quay.io/org/image@sha256:{HEX}")).unwrap();
    assert_eq!(pinned.tag, None);
    assert_eq!(pinned.manifest_reference(), format!("sha256:{HEX}"));
    // Ironic's own examples write an empty tag before the digest.
    let ironic = Reference::parse(&format!("oci://host/p/c:@sha256:{HEX}")).unwrap();
    assert_eq!(
        (ironic.repository.as_str(), ironic.tag),
        ("p/c", None::<String>)
    );
    let hub = Reference::parse("oci://docker.io/debian:12").unwrap();
    assert_eq!(
        (hub.registry.as_str(), hub.repository.as_str()),
        ("registry-1.docker.io", "library/debian")
    );
    assert!(is_oci("OCI://host/x"));
    assert!(!is_oci("http://host/x"));
}

#[test]
fn malformed_references_say_what_is_wrong() {
    for (source, words) in [
        ("oci://registry.example", "no repository"),
        ("oci:///repo:tag", "not a registry host"),
        ("oci://host/Upper/case", "not a repository name"),
        ("oci://host/repo:bad tag", "not a tag"),
        ("oci://host/repo@sha256:abc", "64 hexadecimal digits"),
        ("oci://host/repo@md5:abc", "not sha256 or sha512"),
        ("oci://host/repo//x", "not a repository name"),
    ] {
        let error = Reference::parse(source).unwrap_err();
        assert!(error.contains(words), "{source}: {error}");
    }
}

#[test]
fn pull_secrets_become_basic_credentials() {
    let docker = STANDARD.encode("robot:s3cret");
    assert_eq!(basic_credential(&docker), docker);
    assert_eq!(basic_credential("robot:s3cret"), docker);
    assert_eq!(basic_credential("token"), STANDARD.encode(":token"));
    let config = json!({"auths": {
        "https://other.example": {"auth": "x"},
        "registry.example:5000": {"auth": docker},
    }});
    assert_eq!(
        secret_from_config(&config, "registry.example:5000", "registry.example"),
        Some(docker.clone())
    );
    assert_eq!(
        secret_from_config(&config, "other.example", "other.example"),
        Some("x".to_owned())
    );
    assert_eq!(
        secret_from_config(&config, "none.example", "none.example"),
        None
    );
}

fn index() -> Value {
    json!({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": [
        {"digest": "sha256:aa", "platform": {"architecture": "amd64", "os": "linux"},
         "annotations": {"disktype": "qcow2"}},
        {"digest": "sha256:bb", "platform": {"architecture": "amd64", "os": "linux"},
         "annotations": {"disktype": "raw"}},
        {"digest": "sha256:cc", "platform": {"architecture": "arm64", "os": "linux"},
         "annotations": {"disktype": "raw"}},
        {"digest": "sha256:dd", "platform": {"architecture": "s390x", "os": "linux"},
         "annotations": {"disktype": "iso"}},
        {"digest": "sha256:ee", "platform": {"architecture": "ppc64le", "os": "linux"}},
    ]})
}

#[test]
fn an_index_entry_is_chosen_by_architecture_then_disk_format() {
    let digests = |arch, prefer_qcow2| {
        candidates(&index(), arch, prefer_qcow2)
            .unwrap()
            .into_iter()
            .map(|candidate| candidate.digest)
            .collect::<Vec<_>>()
    };
    assert_eq!(digests(Some("x86_64"), false), ["sha256:bb", "sha256:aa"]);
    assert_eq!(digests(Some("x86_64"), true), ["sha256:aa", "sha256:bb"]);
    assert_eq!(digests(Some("aarch64"), false), ["sha256:cc"]);
    assert_eq!(
        digests(None, false),
        ["sha256:bb", "sha256:cc", "sha256:aa"]
    );
    assert!(is_index(&index(), None));
    assert!(!is_index(&json!({"layers": []}), Some(MEDIA_MANIFEST)));
}

#[test]
fn an_index_without_a_usable_entry_says_why() {
    let no_arch = candidates(&index(), Some("riscv64"), false).unwrap_err();
    assert!(
        no_arch.contains("no manifest for the node's architecture riscv64")
            && no_arch.contains("amd64, arm64, s390x, ppc64le"),
        "{no_arch}"
    );
    let iso = candidates(&index(), Some("s390x"), false).unwrap_err();
    assert!(iso.contains("disktype iso"), "{iso}");
    let bare = candidates(&index(), Some("ppc64le"), false).unwrap_err();
    assert!(bare.contains("disktype (none)"), "{bare}");
    let empty = candidates(&json!({"manifests": []}), None, false).unwrap_err();
    assert!(empty.contains("lists no manifests"), "{empty}");
}

#[test]
fn an_artifact_has_one_uncompressed_layer() {
    let layer = |media: &str| {
        json!({"mediaType": MEDIA_MANIFEST, "annotations": {"disktype": "qcow2"}, "layers": [
            {"mediaType": media, "digest": format!("sha256:{HEX}"), "size": 42}
        ]})
    };
    let found = single_layer(&layer("application/vnd.oci.image.layer.v1.tar")).unwrap();
    assert_eq!(found.digest, format!("sha256:{HEX}"));
    assert_eq!((found.size, found.disk_format), (Some(42), Some("qcow2")));
    let zstd = single_layer(&layer("application/zstd")).unwrap_err();
    assert!(zstd.contains("compressed"), "{zstd}");
    let container = single_layer(&json!({"layers": [{}, {}]})).unwrap_err();
    assert!(container.contains("2 layers"), "{container}");
    let mut vmdk = layer("application/octet-stream");
    vmdk["annotations"]["disktype"] = "vmdk".into();
    let vmdk = single_layer(&vmdk).unwrap_err();
    assert!(vmdk.contains("disktype vmdk"), "{vmdk}");
    let mut plain = layer("application/octet-stream");
    plain["annotations"] = json!({});
    assert_eq!(single_layer(&plain).unwrap().disk_format, None);
}
