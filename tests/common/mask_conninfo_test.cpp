// Passwords never reach a message: connection strings, URIs and libpq's errors about them.
#include "common/mask_conninfo.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace tw {
namespace {

TEST(MaskConninfo, MasksWellFormedStringsAndKeepsTheRest) {
  EXPECT_EQ(mask_conninfo("host=db port=5432 password=hunter22 user=ann"),
            "host=db port=5432 password=***** user=ann");
  EXPECT_EQ(mask_conninfo(R"(host=db password = 'se cret\' x' user=ann)"),
            "host=db password = ***** user=ann");
  EXPECT_EQ(mask_conninfo("postgresql://ann:hunter22@db:5432/tw?sslmode=require"),
            "postgresql://ann:*****@db:5432/tw?sslmode=require");
  EXPECT_EQ(mask_conninfo("postgres://db/tw?user=ann&password=hunter22&sslmode=require"),
            "postgres://db/tw?user=ann&password=*****&sslmode=require");
  EXPECT_EQ(mask_conninfo("host=db user=ann dbname=tw"), "host=db user=ann dbname=tw");
}

TEST(MaskConninfo, MasksAPasswordInsideAMessage) {
  EXPECT_EQ(mask_conninfo(R"(invalid URI: "postgresql://ann:p@ss@word@[::1/d")"),
            R"(invalid URI: "postgresql://ann:*****@[::1/d")");
  EXPECT_EQ(mask_conninfo("argument not expected: PASSWORD=hunter22"),
            "argument not expected: PASSWORD=*****");
}

// libpq's messages about strings it could not read (as libpq 15 words them), the string,
// and its password.
struct Case {
  std::string message;
  std::string conninfo;
  std::string password;
};

const std::vector<Case> kCases = {
    {R"(invalid percent-encoded token: "s3c%ZZretpw")", "postgresql://u:s3c%ZZretpw@h:1/d",
     "s3c%ZZretpw"},
    {R"(invalid percent-encoded token: "ded%pw@h")", "postgresql://u:unenc@ded%pw@h/d", "ded%pw"},
    {R"(could not translate host name "sign@h" to address)", "postgresql://u:at@sign@h/d",
     "sign"},
    {R"(missing "=" after "w0rds" in connection info string)",
     "host=h password = two w0rds connect_timeout=5", "w0rds"},
    {R"(missing "=" after "ted" in connection info string)", "host=h password=quo ted pw=1",
     "ted"},
    {R"(invalid connection option "bogus" near "s3'cret")", R"(password='s3\'cret' bogus)",
     "s3'cret"},
    {R"(unexpected "qu3rypw")", "postgresql://h/d?password=qu3rypw&x=1", "qu3rypw"},
    {R"(unexpected "p w")", "postgresql://h/d?password=p%20w", "p w"},
};

TEST(MaskConninfo, MasksWhatAMalformedStringMightHoldAsAPassword) {
  for (const auto& c : kCases) {
    const std::string masked = mask_conninfo(c.message, c.conninfo);
    EXPECT_EQ(masked.find(c.password), std::string::npos) << c.conninfo << " -> " << masked;
    EXPECT_NE(masked.find("*****"), std::string::npos) << masked;
    const std::string itself = mask_conninfo(c.conninfo, c.conninfo);
    EXPECT_EQ(itself.find(c.password), std::string::npos) << c.conninfo << " -> " << itself;
  }
}

TEST(MaskConninfo, AShortPieceIsMaskedOnlyWhereItStandsAlone) {
  EXPECT_EQ(mask_conninfo(R"(could not translate host name "sign@h" to address)",
                          "postgresql://u:at@sign@h/d"),
            R"(could not translate host name "*****@h" to address)");
  EXPECT_EQ(mask_conninfo(R"(bad token "pw" in "u:pw@[::1")", "postgresql://u:pw@[::1/d"),
            R"(bad token "*****" in "u:*****@[::1")");
}

TEST(MaskConninfo, LeavesAMessageWithoutThePasswordAlone) {
  const std::string message =
      R"(connection to server at "127.0.0.1", port 1 failed: Connection refused)";
  EXPECT_EQ(mask_conninfo(message, "host=127.0.0.1 port=1 password=longsecret"), message);
  EXPECT_EQ(mask_conninfo(message, "postgresql://ann:longsecret@127.0.0.1:1/d"), message);
}

}  // namespace
}  // namespace tw
