// The icons the book's theme (pydata-sphinx-theme, sphinx-book-theme) shows, and nothing else.
import { dom, library } from "@fortawesome/fontawesome-svg-core";
import {
  faAngleLeft, faAngleRight, faArrowUp, faBars, faCircleHalfStroke, faDownload, faExpand,
  faFile, faFilePdf, faList, faMagnifyingGlass, faMoon, faOutdent, faSun,
} from "@fortawesome/free-solid-svg-icons";

library.add(faAngleLeft, faAngleRight, faArrowUp, faBars, faCircleHalfStroke, faDownload,
  faExpand, faFile, faFilePdf, faList, faMagnifyingGlass, faMoon, faOutdent, faSun);
dom.watch();
