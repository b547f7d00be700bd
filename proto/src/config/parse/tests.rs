use super::*;

#[test]
fn parses_a_virtual_service() {
    let yaml = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: r\n  namespace: shop\nspec:\n  hosts: [reviews]\n  http:\n  - route:\n    - destination:\n        host: reviews\n";
    let out = parse_documents("a.yaml", yaml);
    assert_eq!(out.len(), 1);
    let parsed = out[0].as_ref().unwrap();
    assert_eq!(parsed.config.key().to_string(), "VirtualService shop/r");
}
