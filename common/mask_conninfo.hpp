// Masking of database passwords in messages (STYLE.md: never log a password). Pure
// functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>

namespace tw {

// `text` with every password replaced by "*****". `text` is a libpq connection string or
// URI, or a message that may quote one or a piece of one (libpq's errors quote what they
// could not read). Masked wherever they appear: `user:PASSWORD@` after `postgres://` or
// `postgresql://` (up to the last '@', since a password may hold an unencoded one),
// `password=VALUE` (quoted or not) and `?password=` / `&password=` in a URI query. When
// `conninfo` is given (the string the message is about, which may be malformed), every
// string that it might hold as a password, read leniently, is also masked wherever it
// appears in `text` (one of fewer than four characters only where it stands alone, not
// inside a word), so this may mask more than the password.
std::string mask_conninfo(std::string_view text, std::string_view conninfo = {});

}  // namespace tw
