#include "common/mask_conninfo.hpp"

#include <algorithm>
#include <cctype>
#include <regex>
#include <vector>

namespace tw {
namespace {

constexpr std::string_view kMask = "*****";

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// %XX decoded; a '%' not followed by two hex digits stays as it is.
std::string percent_decoded(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 &&
        hex_value(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2])));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// Collects the strings a malformed connection string might hold as a password.
class Candidates {
 public:
  // `value` as written and decoded, and its pieces around each of `separators` (libpq
  // may cut a password there and quote one piece).
  void add(std::string_view value, std::string_view separators) {
    put(value);
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (separators.find(value[i]) == std::string_view::npos) continue;
      put(value.substr(0, i));
      put(value.substr(i + 1));
    }
  }
  // Longest first, so that a piece never masks part of a longer candidate first.
  std::vector<std::string> sorted() && {
    std::sort(all_.begin(), all_.end(),
              [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
    return std::move(all_);
  }

 private:
  void put(std::string_view s) {
    if (s.empty()) return;
    all_.emplace_back(s);
    all_.push_back(percent_decoded(s));
  }
  std::vector<std::string> all_;
};

// URI: the user info's password, up to the last '@' (a password may hold an unencoded
// one), and the values of password= in the query.
void uri_candidates(std::string_view rest, Candidates& out) {
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = rest.substr(0, at);
    if (const auto colon = userinfo.find(':'); colon != std::string_view::npos) {
      out.add(userinfo.substr(colon + 1), "@/?#%");
    }
  }
  for (auto q = rest.find_first_of("?&"); q != std::string_view::npos;
       q = rest.find_first_of("?&", q + 1)) {
    constexpr std::string_view kKey = "password=";
    std::string_view param = rest.substr(q + 1);
    if (param.size() < kKey.size() || !iequals(param.substr(0, kKey.size()), kKey)) continue;
    param.remove_prefix(kKey.size());
    out.add(param.substr(0, param.find('&')), "%");
  }
}

// key=value: every value of a password keyword, quoted (backslash escapes, maybe never
// closed) or up to the next space, and the words after it up to the next key=value (a
// password with spaces, unquoted, leaves them behind as stray words).
void keyword_candidates(std::string_view text, Candidates& out) {
  constexpr std::string_view kKey = "password";
  for (std::size_t pos = 0; pos + kKey.size() <= text.size(); ++pos) {
    if (!iequals(text.substr(pos, kKey.size()), kKey)) continue;
    if (pos > 0 && (text[pos - 1] == '?' || text[pos - 1] == '&')) continue;  // a URI's query
    std::size_t i = pos + kKey.size();
    while (i < text.size() && is_space(text[i])) ++i;
    if (i >= text.size() || text[i] != '=') continue;
    ++i;
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t start = i;
    if (i < text.size() && text[i] == '\'') {
      std::string unescaped;
      for (++i; i < text.size() && text[i] != '\''; ++i) {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        unescaped.push_back(text[i]);
      }
      out.add(unescaped, " \\'");
      out.add(text.substr(start + 1, i - start - 1), " \\'");
      continue;
    }
    // Unquoted: the value, then stray words up to one holding '='.
    std::size_t end = start;
    for (std::size_t word = start; word < text.size();) {
      std::size_t word_end = word;
      while (word_end < text.size() && !is_space(text[word_end])) ++word_end;
      if (word > start && text.substr(word, word_end - word).find('=') != std::string_view::npos) {
        break;
      }
      end = word_end;
      for (word = word_end; word < text.size() && is_space(text[word]);) ++word;
    }
    out.add(text.substr(start, end - start), " \t\n");
  }
}

std::vector<std::string> password_candidates(std::string_view conninfo) {
  Candidates out;
  if (const auto scheme = conninfo.find("://"); scheme != std::string_view::npos) {
    uri_candidates(conninfo.substr(scheme + 3), out);
  }
  keyword_candidates(conninfo, out);
  return std::move(out).sorted();
}

bool is_alnum_at(const std::string& text, std::size_t i) {
  return i < text.size() && std::isalnum(static_cast<unsigned char>(text[i])) != 0;
}

// Replaces `what` in `text`. A candidate of fewer than four characters only where it stands
// alone (not inside a run of letters and digits): "at" of "p@at@host" must not turn
// "translate" into "transl*****e".
void replace_all(std::string& text, std::string_view what) {
  constexpr std::size_t kShort = 4;
  for (auto at = text.find(what); at != std::string::npos;) {
    if (what.size() < kShort &&
        ((at > 0 && is_alnum_at(text, at - 1)) || is_alnum_at(text, at + what.size()))) {
      at = text.find(what, at + 1);
      continue;
    }
    text.replace(at, what.size(), kMask);
    at = text.find(what, at + kMask.size());
  }
}

}  // namespace

std::string mask_conninfo(std::string_view text, std::string_view conninfo) {
  std::string masked(text);
  for (const auto& candidate : password_candidates(conninfo)) replace_all(masked, candidate);
  // URI user info: up to the last '@' of the URI (greedy), which ends at a space or quote.
  static const std::regex uri(R"((postgres(?:ql)?://[^\s"':/@]*:)[^\s"']*@)", std::regex::icase);
  // key=value: password=secret, password = 'se cret' (maybe never closed); not in a query
  static const std::regex keyword(R"(((?:^|[^?&])password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+))",
                                  std::regex::icase);
  // URI query parameter: ?password=secret
  static const std::regex query(R"(([?&]password=)[^&\s"']*)", std::regex::icase);
  masked = std::regex_replace(masked, uri, "$1*****@");
  masked = std::regex_replace(masked, keyword, "$1*****");
  return std::regex_replace(masked, query, "$1*****");
}

}  // namespace tw
