#include <gtest/gtest.h>

#include "audit/json.h"

namespace {

using resident::audit::Json;

TEST(AuditJson, ParsesAndDumpsRoundTrip) {
  const std::string text =
      R"({"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "x\"y\\z\n\u00e9"}, "d": 9007199254740991})";
  const Json parsed = Json::parse(text);
  EXPECT_EQ(parsed.find("a")->as_array().size(), 6u);
  EXPECT_DOUBLE_EQ(parsed.find("a")->as_array()[2].as_number(), -300.0);
  EXPECT_EQ(parsed.find("b")->find("c")->as_string(), "x\"y\\z\n\xc3\xa9");
  EXPECT_EQ(parsed.find("d")->as_number(), 9007199254740991.0);
  const Json again = Json::parse(parsed.dump());
  EXPECT_EQ(again.dump(), parsed.dump());
  EXPECT_EQ(Json::parse(parsed.dump(0)).dump(), parsed.dump());
}

TEST(AuditJson, ErrorsNameLineAndColumn) {
  try {
    Json::parse("{\n  \"a\": [1, 2,,]\n}");
    FAIL() << "parsed malformed JSON";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2, column 14"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Json::parse("{\"a\": 1} x"), std::runtime_error);
  EXPECT_THROW(Json::parse("\"unterminated"), std::runtime_error);
  EXPECT_THROW(Json::parse(""), std::runtime_error);
}

TEST(AuditJson, AccessorsRejectTheWrongType) {
  const Json j = Json::parse("[1]");
  EXPECT_THROW(j.as_object(), std::runtime_error);
  EXPECT_THROW(j.as_array()[0].as_string(), std::runtime_error);
  EXPECT_EQ(j.find("x"), nullptr);
}

}  // namespace
