"""ssl.principal.mapping.rules: the docs' example, DEFAULT, flags, escapes and bad rules."""

from __future__ import annotations

import pytest

from millrace.common.errors import ConfigError
from millrace.security.errors import SslAuthenticationException
from millrace.security.ssl_principal_mapper import NoMatchingRule, SslPrincipalMapper

# Kafka docs, "Customizing SSL User Name" (reference security.md section 2.3).
DOCS_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
        ("CN=kafka-svc,OU=ServiceUsers,O=Org,C=US", "kafka-svc"),  # first rule, no case change
        ("OU=Eng,cn=Bob.Smith,O=Org", "bob.smith"),  # third rule
        ("OU=NoCommonName,O=Org", "OU=NoCommonName,O=Org"),  # DEFAULT
    ],
)
def test_docs_example(dn: str, name: str) -> None:
    assert SslPrincipalMapper.from_rules(DOCS_RULES).get_name(dn) == name


def test_rules_are_tried_in_order() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),.*$/first-$1/, RULE:^CN=(.*)$/second/")
    assert mapper.get_name("CN=a,O=b") == "first-a"
    assert mapper.get_name("CN=a") == "second"
    assert len(mapper.rules) == 2


def test_default_returns_the_dn() -> None:
    dn = "CN=writeuser,OU=Unknown,O=Unknown,L=Unknown,ST=Unknown,C=Unknown"
    assert SslPrincipalMapper.from_rules("DEFAULT").get_name(dn) == dn
    assert SslPrincipalMapper.from_rules(None).get_name(dn) == dn


def test_upper_and_lower_flags() -> None:
    dn = "CN=Alice,O=Org"
    assert SslPrincipalMapper.from_rules("RULE:^CN=(.*?),.*$/$1/U").get_name(dn) == "ALICE"
    assert SslPrincipalMapper.from_rules("RULE:^CN=(.*?),.*$/$1/L").get_name(dn) == "alice"
    assert SslPrincipalMapper.from_rules("RULE:^CN=(.*?),.*$/$1/").get_name(dn) == "Alice"


def test_regex_must_match_the_whole_dn() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:CN=(\\w+)/$1/")
    assert mapper.get_name("CN=alice") == "alice"
    with pytest.raises(NoMatchingRule):
        mapper.get_name("CN=alice,O=Org")  # re.search would find it; Kafka's matches() does not


def test_no_matching_rule() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule) as info:
        mapper.get_name("CN=alice,OU=Humans")
    assert isinstance(info.value, SslAuthenticationException)
    assert "No rules apply to CN=alice,OU=Humans" in str(info.value)


def test_escaped_slashes_in_regex_and_replacement() -> None:
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=([^,\/]*)\/([^,]*),.*$/$2\/$1/")
    assert mapper.get_name("CN=team/alice,O=Org") == "alice/team"
    # An unescaped '/' ends the regex even inside a character class, as in Kafka.
    with pytest.raises(ConfigError):
        SslPrincipalMapper.from_rules(r"RULE:^CN=([^,/]*)\/([^,]*),.*$/$2\/$1/")


def test_commas_inside_a_rule_do_not_split_it() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),O=(.*?)$/$1,$2/, DEFAULT")
    assert mapper.get_name("CN=a,O=b") == "a,b"
    assert mapper.get_name("O=b") == "O=b"


def test_separators_whitespace_and_empty_items() -> None:
    mapper = SslPrincipalMapper.from_rules("  RULE:^CN=(.*)$/$1/L ,\n , DEFAULT\nDEFAULT  ")
    assert len(mapper.rules) == 3
    assert mapper.get_name("CN=X") == "x"


def test_group_references_like_java() -> None:
    dn = "CN=a,OU=b"
    two_groups = "RULE:^CN=(.*?),OU=(.*)$"
    assert SslPrincipalMapper.from_rules(two_groups + "/$2-$1/").get_name(dn) == "b-a"
    assert SslPrincipalMapper.from_rules(two_groups + "/$0/").get_name(dn) == dn
    assert SslPrincipalMapper.from_rules(two_groups + "/$1@$4/").get_name(dn) == "a@$4"
    assert SslPrincipalMapper.from_rules(two_groups + "/$12/").get_name(dn) == "a2"
    assert SslPrincipalMapper.from_rules(two_groups + r"/\$1/").get_name(dn) == "$1"
    named = "RULE:^CN=(?<user>[^,]*),.*$/${user}/"
    assert SslPrincipalMapper.from_rules(named).get_name(dn) == "a"


def test_replacement_is_applied_like_java_replace_all() -> None:
    # Java's "abc".replaceAll(".*", "x") is "xx": a second, empty match at the end.
    assert SslPrincipalMapper.from_rules("RULE:.*/x/").get_name("CN=a") == "xx"
    assert SslPrincipalMapper.from_rules("RULE:^.*$/x/").get_name("CN=a") == "x"


@pytest.mark.parametrize(
    "rules",
    [
        "RULE:abc",  # no replacement
        "RULE:^CN=(.*)$/$1",  # replacement not closed
        "RULE:(unclosed/x/",  # regex does not compile
        "RULE:^CN=.*$/$1/",  # $1 without any group
        "RULE:^CN=(.*)$/$x/",  # '$' not followed by a group
        "RULE:^CN=(.*)$/${nope}/",  # unknown named group
        "RULE:^CN=(.*)$/$1\\/",  # lone backslash at the end of the replacement
        "RULE:^CN=(.*)$/$1/X",  # unknown flag
        "RULE:^CN=(.*)$/$1/LU",  # junk after the flag
        "DEFAULT RULE:^(.*)$/$1/",  # missing separator
        "FOO",
        "default",
        "DEFAULT, BAR",
        "",
        " , ",
    ],
)
def test_bad_rules_are_config_errors_naming_the_key(rules: str) -> None:
    with pytest.raises(ConfigError) as info:
        SslPrincipalMapper.from_rules(rules)
    assert "ssl.principal.mapping.rules" in str(info.value)


def test_bad_rule_error_names_the_rule() -> None:
    with pytest.raises(ConfigError) as info:
        SslPrincipalMapper.from_rules("DEFAULT, RULE:(bad/x/")
    assert "RULE:(bad/x/" in str(info.value)


def test_every_prefix_of_a_rule_parses_or_is_a_config_error() -> None:
    counts: list[int] = []
    for end in range(len(DOCS_RULES) + 1):
        try:
            counts.append(len(SslPrincipalMapper.from_rules(DOCS_RULES[:end]).rules))
        except ConfigError:
            continue
    assert counts[-1] == 4 and sorted(set(counts)) == [1, 2, 3, 4]
    with pytest.raises(ConfigError):
        SslPrincipalMapper.from_rules(DOCS_RULES + "x")
