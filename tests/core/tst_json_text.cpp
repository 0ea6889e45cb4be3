// JSON text checked and laid out without a tree (trace info --json writes a
// store's plan so): is_json_container_text against nlohmann's parser, and
// write_json_laid_out against json_text of the parsed value.

#include <QtTest>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_reader.h"
#include "core/json_text.h"

using nlohmann::json;

namespace {

// What parse_json_text makes of `text`: an object or array read whole.
bool parser_reads_container(const std::string& text) {
  const json parsed = cs::parse_json_text(text);
  return parsed.is_object() || parsed.is_array();
}

std::string laid_out(const std::string& text, int level = 0) {
  std::ostringstream out;
  cs::write_json_laid_out(out, text, 2, level);
  return out.str();
}

}  // namespace

class TestJsonText : public QObject {
  Q_OBJECT

 private slots:
  void checkedAsTheParserReads_data();
  void checkedAsTheParserReads();
  void mutantsCheckedAsTheParserReads();
  void laidOutAsADump_data();
  void laidOutAsADump();
  void laidOutAtALevel();
};

void TestJsonText::checkedAsTheParserReads_data() {
  QTest::addColumn<QByteArray>("text");
  QTest::addColumn<bool>("read");
  const auto row = [](const char* name, const std::string& text, bool read) {
    QTest::addRow("%s", name) << QByteArray(text.data(), static_cast<int>(text.size())) << read;
  };
  row("object", R"({"a":1,"b":[true,false,null],"c":{"d":"e"}})", true);
  row("spaces inside", " \t\n\r", false);
  row("spaced", "{ \"a\" :\n[ 1 ,\t2 ] \r}", true);
  row("empty object", "{}", true);
  row("empty array", "[ ]", true);
  row("scalar", "1", false);
  row("string", R"("{}")", false);
  row("space before", " {}", false);
  row("space after", "{} ", false);
  row("byte-order mark", "\xEF\xBB\xBF{}", false);
  row("two documents", "{}{}", false);
  row("trailing comma", "[1,]", false);
  row("missing colon", R"({"a" 1})", false);
  row("key not a string", "{1:2}", false);
  row("missing comma", "[1 2]", false);
  row("unclosed", R"({"a":[1})", false);
  row("closed twice", "[1]]", false);
  row("mismatched", "[1}", false);
  row("numbers", "[0,-0,1.5,-2e10,3E+2,4e-3,1e-400,18446744073709551616,0.1000000000000000055511]",
      true);
  row("largest double", "[1.7976931348623157e308,-1.7976931348623157e+308]", true);
  row("past a double", "[1.7976931348623159e308]", false);
  row("far past a double", "[-1e400]", false);
  row("past a double, in digits", "[1" + std::string(400, '0') + "]", false);
  row("within a double, in digits", "[1" + std::string(300, '0') + ".5]", true);
  row("leading zero", "[01]", false);
  row("bare minus", "[-]", false);
  row("bare point", "[1.]", false);
  row("point first", "[.5]", false);
  row("bare exponent", "[1e]", false);
  row("signed bare exponent", "[1e+]", false);
  row("plus sign", "[+1]", false);
  row("literal cut", "[tru]", false);
  row("literal long", "[nulll]", false);
  row("literals run together", "[truefalse]", false);
  row("escapes", R"(["\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE80"])", true);
  row("bad escape", R"(["\x"])", false);
  row("short unicode escape", R"(["\u12"])", false);
  row("bad hex", R"(["\u12G4"])", false);
  row("lone high surrogate", R"(["\uD800"])", false);
  row("high surrogate, other escape", R"(["\uD800\u0041"])", false);
  row("lone low surrogate", R"(["\uDC00"])", false);
  row("control character", "[\"a\x01\"]", false);
  row("tab in a string", "[\"a\tb\"]", false);
  row("UTF-8", "[\"\xC3\xA9\xE6\xA0\xB8\xF0\x9F\x9A\x80\"]", true);
  row("overlong", "[\"\xC0\x80\"]", false);
  row("overlong 3", "[\"\xE0\x80\x80\"]", false);
  row("UTF-8 surrogate", "[\"\xED\xA0\x80\"]", false);
  row("past U+10FFFF", "[\"\xF4\x90\x80\x80\"]", false);
  row("F5", "[\"\xF5\x80\x80\x80\"]", false);
  row("cut sequence", "[\"\xE6\xA0\"]", false);
  row("lone continuation", "[\"\x80\"]", false);
  row("Latin-1", "[\"\xFF\"]", false);
  row("NUL inside", std::string("[\"a\0\"]", 6), false);
  row("unclosed string", R"(["abc)", false);
  row("deep, read", std::string(256, '[') + "1" + std::string(256, ']'), true);
  row("deep, too deep", std::string(257, '[') + "1" + std::string(257, ']'), false);
  row("deepest empty", std::string(257, '[') + std::string(257, ']'), true);
  row("deepest empty, too deep", std::string(258, '[') + std::string(258, ']'), false);
  row("deep key", std::string(255, '[') + R"({"a":1})" + std::string(255, ']'), true);
  row("deep key, too deep", std::string(256, '[') + R"({"a":1})" + std::string(256, ']'), false);
  row("deepest empty object", std::string(256, '[') + "{}" + std::string(256, ']'), true);
}

void TestJsonText::checkedAsTheParserReads() {
  QFETCH(QByteArray, text);
  QFETCH(bool, read);
  const std::string t = text.toStdString();
  QCOMPARE(cs::is_json_container_text(t, cs::kMaxJsonDepth), read);
  // Where it reads one, so does the parser (the byte-order mark and the
  // spaces around are the ones the parser reads too: they are read the slow way).
  if (read) QVERIFY(parser_reads_container(t));
  const QString name = QTest::currentDataTag();
  if (!name.startsWith("space") && name != "byte-order mark")
    QCOMPARE(parser_reads_container(t), read);
}

// Documents with bytes changed, cut or added at random (the same each run):
// every one the check reads, the parser reads, to the same value when laid out.
void TestJsonText::mutantsCheckedAsTheParserReads() {
  const std::string seeds[] = {
      R"({"a":[1,-2.5e3,true,false,null,"x\u00e9\n"],"b":{"c":{},"d":[]},"e":"\uD83D\uDE80"})",
      "[{\"k\":\"\xC3\xA9\xE6\xA0\xB8\xF0\x9F\x9A\x80\"},0,[[[]]],{\"z\":0.1e-2,\"y\":1e300}]"};
  const std::string bytes = "{}[]:,\"\\ \n-+.eE0123456789tfnulrsu\xC3\xA9\x80\xED\xF4\x01";
  std::mt19937 random(20261205);
  int read = 0;
  for (int n = 0; n < 40000; ++n) {
    std::string t = seeds[n % 2];
    for (int k = 1 + static_cast<int>(random() % 3); k > 0; --k) {
      const std::size_t at = random() % t.size();
      const char b = bytes[random() % bytes.size()];
      switch (random() % 3) {
        case 0:
          t[at] = b;
          break;
        case 1:
          t.erase(at, 1);
          break;
        default:
          t.insert(at, 1, b);
      }
      if (t.empty()) t = "x";
    }
    const bool checked = cs::is_json_container_text(t, cs::kMaxJsonDepth);
    const bool spaced = t.find_first_of(" \n") == 0 || t.find_last_of(" \n") == t.size() - 1;
    if (!spaced) QVERIFY2(checked == parser_reads_container(t), t.c_str());
    if (checked) {
      ++read;
      QCOMPARE(json::parse(laid_out(t)), json::parse(t));
    }
  }
  QVERIFY(read > 1000);  // the mutants reach both answers
}

void TestJsonText::laidOutAsADump_data() {
  QTest::addColumn<QByteArray>("text");
  QTest::newRow("object") << QByteArray(R"({"a":[],"b":{"c":[1,{}],"d":"e,{}[]:\"\\"},"f":null})");
  QTest::newRow("array") << QByteArray(R"([[[1]],{"a":{"b":[true,false]}},-1.5,"x"])");
  QTest::newRow("spaced") << QByteArray("{ \"a\" :\n[ 1 ,\t2 ] \r, \"b\" : { } , \"c\" : [ ] }");
  QTest::newRow("UTF-8") << QByteArray("{\"\xC3\xA9\":\"\xF0\x9F\x9A\x80\"}");
}

// Where the text is as nlohmann writes it (a plan the app wrote), what is
// laid out is what a dump of the parsed text writes, byte for byte.
void TestJsonText::laidOutAsADump() {
  QFETCH(QByteArray, text);
  const std::string t = text.toStdString();
  QVERIFY(cs::is_json_container_text(t, cs::kMaxJsonDepth));
  const json parsed = json::parse(t);
  QCOMPARE(laid_out(t), cs::json_text(parsed, 2));
  QCOMPARE(laid_out(cs::json_text(parsed)), cs::json_text(parsed, 2));
}

// A value nested in a document is laid out as the document's dump lays it out.
void TestJsonText::laidOutAtALevel() {
  const std::string plan = R"({"a":[1,{"b":[]}]})";
  const std::string dump = cs::json_text(json{{"meta", {{"plan", json::parse(plan)}}}}, 2);
  const std::string at = "\"plan\": ";
  const std::size_t from = dump.find(at) + at.size();
  QCOMPARE(laid_out(plan, 2), dump.substr(from, dump.find("\n  }") - from));
}

QTEST_GUILESS_MAIN(TestJsonText)
#include "tst_json_text.moc"
